"""The group engine: finite groups by name or from permutation generators, with a multiplication
table, and their structure (derived series, composition factors, exponent, shortest abelian and
elementary-abelian-2 subnormal series).

    >>> from statetrack.algebra import get_group
    >>> g = get_group("S3"); g.order, g.perm(g.mul(1, 2))

See :mod:`statetrack.algebra.group` for the id and composition conventions.
"""

from statetrack.algebra.group import MAX_DEGREE, MAX_ORDER, Group
from statetrack.algebra.names import (
    ALLOWED_FORMS,
    DEFAULT_GROUPS,
    get_group,
    group_from_generators,
    group_order_from_name,
    parse_group_name,
    structure_table,
)
from statetrack.algebra.structure import derived_series, structure_of

__all__ = [
    "Group",
    "MAX_ORDER",
    "MAX_DEGREE",
    "ALLOWED_FORMS",
    "get_group",
    "group_from_generators",
    "group_order_from_name",
    "parse_group_name",
    "DEFAULT_GROUPS",
    "derived_series",
    "structure_of",
    "structure_table",
]
