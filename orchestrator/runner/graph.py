"""The chain of `duckscore run`, composed in one place: the fusion stages of a plan, then the
score stages of a policy, which read the parent features the fusion stages make (core/graph.py).
`run`, its partitions and Spark shards materialise it on a Session; the live scorer compiles it
to one statement."""

from __future__ import annotations

from ..core.errors import TemplateError
from ..core.graph import Graph
from ..core.render import ColumnParameter
from ..fusion.code_stages import ENTITIES_INPUT
from ..fusion.recipe import FusePlan
from ..fusion.stages import FEATURES_FILE, FUSED_FILE, LOG, RERANK_INPUT, fuse_graph
from ..fusion.traces import TRACE_SPANS
from ..scoring.policy_view import ScorePolicy
from ..scoring.stages import CONTRACT_FILE, PARENTS_FILE, QUERIES_FILE, QUERY_LIST, score_graph

# what `run` writes of its stages, in order (a trace export adds spans.parquet)
RUN_OUTPUTS = (FUSED_FILE, FEATURES_FILE, PARENTS_FILE, QUERIES_FILE, CONTRACT_FILE)


def run_graph(
    fuse_plan: FusePlan,
    policy: ScorePolicy,
    top_n: int | ColumnParameter = 5,
    *,
    sorted_outputs: bool = True,
    with_query_ids: bool = False,
    **fusion: bool,
) -> Graph:
    """Fusion (fusion/stages.py: fuse_graph, whose options `fusion` holds — explain, shared,
    spans, portable) then scoring (scoring/stages.py: score_graph), every query of the input
    `query_ids` decided when `with_query_ids`; outputs in the engine's order unless
    `sorted_outputs`."""
    fusion_stages = fuse_graph(fuse_plan, sorted_outputs=sorted_outputs, **fusion)
    scoring = score_graph(
        policy, top_n, with_query_ids=with_query_ids, sorted_outputs=sorted_outputs
    )
    graph = fusion_stages.then(scoring)
    given = {LOG, ENTITIES_INPUT, TRACE_SPANS, RERANK_INPUT, QUERY_LIST}
    if set(graph.inputs) - given:  # a score input no fusion stage makes
        raise TemplateError(f"the run graph reads {graph.inputs}: a stage's name changed")
    return graph
