"""Where Chromium's print-to-PDF put each element of a page: the tagged PDF's structure tree
(``page.pdf(tagged=True)``) maps every table, row, paragraph, heading and figure to the
marked content it drew, and each piece of marked content names its page. An element whose
content lies on two pages was split by a page break.

Read with pypdf (the test extra)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pypdf import PdfReader
from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject

# Structure types that must never be split: a reader loses a table's header, a row's
# cells, a plot's half or a sentence's end at the break. Document and NonStruct (the page
# and its generic boxes) and table cells (inside their row) are not checked on their own.
WHOLE = ("/Table", "/TR", "/Figure", "/P", "/LI", "/H1", "/H2", "/H3", "/H4", "/Caption")


@dataclass
class Element:
    """One structure element: its type, the pages its content lies on, its text (from the
    ActualText/Alt it carries, or empty) and its position in document order."""

    kind: str
    pages: frozenset[int]
    alt: str
    order: int


def _resolved(item):
    return item.get_object() if isinstance(item, IndirectObject) else item


def _kids(element: DictionaryObject) -> list:
    kids = element.get("/K")
    if kids is None:
        return []
    return [_resolved(k) for k in (kids if isinstance(kids, ArrayObject) else [kids])]


class PdfLayout:
    """A printed page's structure elements (:attr:`elements`, in document order) and each
    page's text (:attr:`texts`)."""

    def __init__(self, path: Path):
        reader = PdfReader(str(path))
        self.pages = len(reader.pages)
        self._number = {page.indirect_reference.idnum: i for i, page in enumerate(reader.pages)}
        # NFKC: the PDF's ligatures (ﬁ) read as the letters the page has.
        self.texts = [unicodedata.normalize("NFKC", page.extract_text() or "")
                      for page in reader.pages]
        root = reader.trailer["/Root"].get("/StructTreeRoot")
        if root is None:
            raise ValueError(f"{path}: not a tagged PDF (print with tagged=True)")
        self.elements: list[Element] = []
        for kid in _kids(_resolved(root)):
            if isinstance(kid, DictionaryObject):
                self._walk(kid, None)

    def _page(self, ref, inherited: int | None) -> int | None:
        return self._number[ref.idnum] if ref is not None else inherited

    def _content_pages(self, element: DictionaryObject, inherited: int | None) -> set[int]:
        page = self._page(element.get("/Pg"), inherited)
        found: set[int] = set()
        for kid in _kids(element):
            if isinstance(kid, DictionaryObject) and "/S" in kid:
                found |= self._content_pages(kid, page)
            elif isinstance(kid, DictionaryObject):  # a marked-content or object reference
                found.add(self._page(kid.get("/Pg"), page))
            else:  # a marked-content id on the element's page
                found.add(page)
        return {p for p in found if p is not None}

    def _walk(self, element: DictionaryObject, inherited: int | None) -> None:
        page = self._page(element.get("/Pg"), inherited)
        alt = str(element.get("/Alt") or element.get("/ActualText") or "")
        self.elements.append(Element(str(element.get("/S")),
                                     frozenset(self._content_pages(element, inherited)), alt,
                                     len(self.elements)))
        for kid in _kids(element):
            if isinstance(kid, DictionaryObject) and "/S" in kid:
                self._walk(kid, page)

    def split(self, kinds: tuple[str, ...] = WHOLE) -> Iterator[Element]:
        """The elements of ``kinds`` whose content lies on more than one page."""
        return (e for e in self.elements if e.kind in kinds and len(e.pages) > 1)

    def page_of_text(self, text: str) -> list[int]:
        """The pages whose extracted text holds ``text`` (whitespace-normalised)."""
        wanted = " ".join(text.split())
        return [i for i, page in enumerate(self.texts) if wanted in " ".join(page.split())]
