"""``evaluator label``: the local labelling page for a sheet folder drawn by ``review``, or
(``--label-studio OUT_DIR``) the sheet written as Label Studio tasks and config."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.cli.options import listen_options, rubrics_dir_option
from evaluator.data.files import show_path
from evaluator.data.study_draw import study_draw_path
from evaluator.label.label_studio import write_label_studio
from evaluator.label.serve import Listen, check_listen, require_extra, serve
from evaluator.label.session import LabelError, LabelSession


@click.command("label")
@click.argument("sheet_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--labeller", "labellers", multiple=True, metavar="NAME",
              help="Who labels (repeatable, at least one): each gets a URL with a token of "
                   "her own.")
@listen_options
@click.option("--show-judge", is_flag=True,
              help="On a sheet that is not blind: show the judge's verdict for a case once "
                   "the labeller has saved her own label (each label records it).")
@click.option("--label-studio", "label_studio", default=None, metavar="OUT_DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="Serve nothing: write the sheet as Label Studio tasks "
                   "(OUT_DIR/tasks.json, with the case text) and labelling config "
                   "(OUT_DIR/config.xml), as blind as the page; read the export back "
                   "with --labels EXPORT.json.")
@click.option("--overwrite", is_flag=True,
              help="With --label-studio: replace OUT_DIR's tasks.json and config.xml.")
@rubrics_dir_option
def label_command(sheet_dir: Path, labellers: tuple[str, ...], listen: Listen, show_judge: bool,
                  label_studio: Path | None, overwrite: bool,
                  rubrics_dirs: tuple[Path, ...]) -> None:
    """Serve a local page where clinicians label SHEET_DIR's cases one at a time (blind to
    the judge by default); every save is appended to SHEET_DIR/journal.jsonl. Prints one
    URL per labeller; stop with Ctrl-C. With --label-studio, write the sheet as Label
    Studio tasks instead (docs/labelling.md, "Label Studio")."""
    if study_draw_path(sheet_dir.resolve().parent).exists():
        # One system's sheet on its own page tells the clinician which system she rates.
        raise LabelError(f"{show_path(sheet_dir)} is one system's sheet of a study: label "
                         "the study with `evaluator study label STUDY_DIR` (one blind queue "
                         "per clinician)")
    if label_studio is not None:
        if labellers or show_judge:
            raise LabelError("--label-studio writes tasks for Label Studio's own users: "
                             "--labeller and --show-judge are for the page; leave them out")
        written = write_label_studio(sheet_dir, label_studio, overwrite=overwrite,
                                     rubrics_dirs=rubrics_dirs)
        click.echo(f"Label Studio: {written.count} task(s) in {show_path(written.tasks)} "
                   f"(holds the case text: keep it where the cases may be), labelling "
                   f"config in {show_path(written.config)}.")
        click.echo("Import the tasks into a project with that config; export it as JSON, "
                   "then give the export as --labels.")
        return
    if overwrite:
        raise LabelError("--overwrite goes with --label-studio OUT_DIR")
    require_extra()
    check_listen(listen)  # before the cases are read
    session = LabelSession(sheet_dir, labellers, show_judge=show_judge,
                           rubrics_dirs=rubrics_dirs)
    info = session.info
    # Once, if a line another server appends breaks the sheet's rules (saving stops).
    session.notify = lambda problem: click.echo(f"error: {problem}", err=True)

    def announce(links: list[tuple[str, str]]) -> None:
        blind = "blind" if info.blind else ("judge shown after each save" if show_judge
                                            else "judge not shown")
        # Each labeller's own count: with an assignment she has her share, not the sheet.
        counts = {p.name: len(p.cases) for p in session.labellers.values()}
        click.echo(f"Labelling {sheet_dir.name} ({info.kind}, {blind}): "
                   f"{len(session.case_ids)} cases in the sheet.")
        echo_links(links, counts, "case")

    serve(session, listen, announce)


def echo_links(links: list[tuple[str, str]], counts: dict[str, int], unit: str) -> None:
    """Each labeller's link, under her name and how many ``unit``s she is given, and how
    to stop."""
    click.echo("Open each link in that labeller's own browser (new links each start):")
    for name, url in links:
        count = counts[name]
        click.echo(f"  {name} ({count} {unit if count == 1 else unit + 's'}):")
        click.echo(f"    {url}")
    click.echo("Stop with Ctrl-C; every saved label is already on disk.")
