"""Reports of a study: tables beside the published numbers, plots, exports (markdown, CSV, LaTeX).

Everything here reads the results database only: ``collect`` finds each run of the study's grid by
its key; nothing is retrained.
"""

from statetrack.report.table import StudyTable, study_table, study_tables

__all__ = ["StudyTable", "study_table", "study_tables"]
