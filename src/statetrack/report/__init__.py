"""Tables (and, later, plots) of a study's results beside the published numbers."""
from statetrack.report.table import StudyTable, study_table

__all__ = ["StudyTable", "study_table"]
