"""Pairwise comparisons (``evaluator compare``): statistics, Bradley-Terry, text."""
