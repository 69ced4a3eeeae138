"""Windowed quantiles for PostgreSQL, which has `percentile_cont` as an aggregate only."""

from __future__ import annotations

from sqlglot import exp

from .refusal import Refusal


def regroup_windowed_quantiles(select: exp.Select) -> exp.Select:
    """PostgreSQL has no windowed percentile_cont. A SELECT whose projections take quantiles over
    whole partitions (`quantile_cont(x, p) OVER (PARTITION BY k…)`, alone or inside a projection's
    expression) reads them instead from a grouped subquery over its one source, joined back on
    the partition keys; its other columns are qualified with the source so the join makes none
    ambiguous."""
    windowed = [
        w
        for w in select.find_all(exp.Window)
        if isinstance(w.this, exp.PercentileCont) and w.find_ancestor(exp.Select) is select
    ]
    if not windowed:
        return select
    keys: list[exp.Expr] = windowed[0].args.get("partition_by") or []
    shapes = {
        (tuple(k.sql() for k in w.args.get("partition_by") or []),
         bool(w.args.get("order") or w.args.get("spec")))
        for w in windowed
    }  # fmt: skip
    source = select.args.get("from_")
    if (
        not keys
        or len(shapes) != 1
        or any(spec for _, spec in shapes)
        or not isinstance(source, exp.From)
        or not isinstance(source.this, exp.Table)
        or any(select.args.get(part) for part in ("joins", "where", "group", "having"))
    ):
        raise Refusal(
            "a windowed quantile_cont other than over whole, identical partitions of one table"
        )
    table = source.this
    name = table.alias_or_name
    key_names = [f"_key{i}" for i in range(len(keys))]
    quantile_names = [
        w.parent.alias if isinstance(w.parent, exp.Alias) else f"_q{i}"
        for i, w in enumerate(windowed)
    ]
    grouped = (
        exp.select(*(exp.alias_(k.copy(), a) for k, a in zip(keys, key_names)))
        .select(*(exp.alias_(w.this.copy(), a) for w, a in zip(windowed, quantile_names)))
        .from_(table.copy())
        .group_by(*(k.copy() for k in keys))
    )
    for projection in select.expressions:
        if isinstance(projection, exp.Star):
            projection.replace(exp.Column(this=exp.Star(), table=exp.to_identifier(name)))
            continue
        for column in projection.find_all(exp.Column):
            own = column.find_ancestor(exp.Select) is select
            if own and not column.table and not isinstance(column.this, exp.Star):
                column.set("table", exp.to_identifier(name))
    for w, a in zip(windowed, quantile_names):
        w.replace(exp.column(a, table="_quantiles"))
    on = exp.and_(
        *(
            exp.EQ(this=exp.column(a, table="_quantiles"), expression=_qualified(k, name))
            for k, a in zip(keys, key_names)
        )
    )
    return select.join(grouped.subquery("_quantiles"), on=on, copy=False)


def _qualified(column: exp.Expr, table: str) -> exp.Expr:
    """`column` with `table` as its qualifier when it has none."""
    copied = column.copy()
    if isinstance(copied, exp.Column) and not copied.table:
        copied.set("table", exp.to_identifier(table))
    return copied
