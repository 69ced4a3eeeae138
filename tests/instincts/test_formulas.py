"""Seed 004's formulas in `duckscore.instincts` (SQL) against the independent plain-Python oracle.

`tests/instincts/instincts_reference.py` is a literal transcription of the seed's TypeScript
(`docs/specs/004-instinct-confidence.txt`; `docs/instincts.md`), written without reading
the SQL. Two black-box entry points are checked:

* `score_counts`: frequency bins at every edge, the Wilson lower bound (also against scipy), the
  human score's loop, the composite's x0.7 penalty around 0.2 and the tiers around their edges;
  floats against the reference with `rel_tol=abs_tol=1e-12` (frequency exactly: it is one
  subtraction, and its double decides the penalty), tiers and methods exactly;
* `replay_events`: UPDATE_RULES with clamping after every event, event order, decay to 0, and
  random sequences; the scores must equal the reference's exact decimals (`float(Decimal)`).

Cases on tier edges cannot be reached exactly through counts (no combination of counts gives a
composite exactly on 0.2/0.4/0.6/0.8: the closest, found by a search with the reference over
observations 0..21+, contradictions 0..9, applications 0..300 and reviews 0..60, are within
1e-11..1e-9); the exact edges are checked on the reference's `tier_of` and `composite_confidence`
themselves, and the implementation on the closest composites either side.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from scipy.stats import binomtest

from duckscore.instincts.scores import replay_events, score_counts

from . import instincts_reference as ref

P = ref.load_parameters()

OUTPUT_COLUMNS = [
    "instinct_id",
    "frequency_score",
    "effectiveness_score",
    "human_score",
    "composite",
    "tier",
    "injection_method",
]
FLOATS = ["frequency_score", "effectiveness_score", "human_score", "composite"]
REPLAY_COLUMNS = ["instinct_id", "event_id", "event_type", "freq_score", "eff_score", "human_score"]
SCORES = ["freq_score", "eff_score", "human_score"]
EVENT_TYPES = list(P["update_rules"])
T0 = pd.Timestamp("2026-01-05 09:00:00")


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


# --------------------------------------------------------------------------------------------
# score_counts: running both sides
# --------------------------------------------------------------------------------------------


def row(
    iid: str,
    obs: int = 3,
    contr: int = 0,
    pos: int = 0,
    apps: int = 0,
    appr: int = 0,
    rej: int = 0,
    reflect: bool = False,
) -> dict[str, Any]:
    return {
        "instinct_id": iid,
        "observation_count": obs,
        "contradiction_count": contr,
        "positive_count": pos,
        "application_count": apps,
        "approvals": appr,
        "rejections": rej,
        "reflect_approved": reflect,
    }


def counts_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows), columns=list(row("x")))
    ints = [
        "observation_count",
        "contradiction_count",
        "positive_count",
        "application_count",
        "approvals",
        "rejections",
    ]
    return frame.astype(
        {**dict.fromkeys(ints, "int64"), "reflect_approved": "bool", "instinct_id": "str"}
    )


def run_counts(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """score_counts on the rows; checks the output's shape and order; rows by instinct_id."""
    out = score_counts(counts_frame(rows))
    assert list(out.columns) == OUTPUT_COLUMNS
    ids = list(out["instinct_id"])
    assert ids == sorted(r["instinct_id"] for r in rows), "one row per instinct_id, in order"
    return {r["instinct_id"]: r for r in out.to_dict("records")}


def check_against_reference(rows: list[dict[str, Any]], exact_frequency: bool = True) -> dict:
    got = run_counts(rows)
    bad = []
    for r in rows:
        want = ref.score_row(r, P)
        g = got[r["instinct_id"]]
        for col in FLOATS:
            same = (
                (g[col] == want[col])
                if (col == "frequency_score" and exact_frequency)
                else close(g[col], want[col])
            )
            if not same:
                bad.append((r, col, want[col], g[col]))
        for col in ("tier", "injection_method"):
            if g[col] != want[col]:
                bad.append((r, col, want[col], g[col]))
    assert not bad, "input, column, expected (seed), got:\n" + "\n".join(map(repr, bad[:20]))
    return got


def test_output_is_one_row_per_instinct_in_order() -> None:
    rows = [row(f"i{n:03d}", obs=n % 25, pos=n % 4, apps=n % 7 + n % 4) for n in range(40)]
    random.Random(1).shuffle(rows)
    out = score_counts(counts_frame(rows))
    assert list(out.columns) == OUTPUT_COLUMNS
    assert list(out["instinct_id"]) == [f"i{n:03d}" for n in range(40)]
    for col in FLOATS:
        assert out[col].dtype == "float64", col
    check_against_reference(rows)


# --------------------------------------------------------------------------------------------
# 维度一：频率分
# --------------------------------------------------------------------------------------------

OBSERVATIONS = [0, 1, 2, 3, 5, 6, 10, 11, 20, 21, 100]
BASE = {
    0: 0.3,
    1: 0.3,
    2: 0.3,
    3: 0.5,
    5: 0.5,
    6: 0.7,
    10: 0.7,
    11: 0.85,
    20: 0.85,
    21: 0.95,
    100: 0.95,
}  # the seed's ternary chain, by hand (observations 0 falls in the first bin)


def test_frequency_reference_matches_the_seed_table() -> None:
    for obs, base in BASE.items():
        assert ref.frequency_score(obs, 0, P) == base
        assert ref.frequency_score(obs, 1, P) == max(0, base - 0.1)  # JS doubles
        assert ref.frequency_score(obs, 10, P) == 0.0  # floored
    # 0.3 - 3 * 0.1 is -5.6e-17 in doubles: Math.max floors it to 0, not a tiny negative
    assert ref.frequency_score(1, 3, P) == 0.0


def test_frequency_bins_at_every_edge_with_contradictions() -> None:
    rows = [
        row(f"o{obs:03d}c{c:02d}", obs=obs, contr=c) for obs in OBSERVATIONS for c in (0, 1, 3, 10)
    ]
    got = check_against_reference(rows)
    for obs in OBSERVATIONS:
        assert got[f"o{obs:03d}c00"]["frequency_score"] == BASE[obs]
        assert got[f"o{obs:03d}c10"]["frequency_score"] == 0.0
        assert got[f"o{obs:03d}c03"]["frequency_score"] >= 0.0


# --------------------------------------------------------------------------------------------
# 维度二：效果分 (Wilson lower bound)
# --------------------------------------------------------------------------------------------

# The seed's z is 1.96; scipy's Wilson interval uses the exact 0.975 normal quantile
# 1.959963984540054. The lower bound moves by about |dL/dz| * 3.6e-5 (< 1e-5 here), so the
# implementation is compared with the reference (same z, same formula) at 1e-12 and with scipy only
# at 1e-4; with scipy's z put in the reference's parameters the two agree at 1e-12, which shows
# the only difference is z.
SCIPY_Z = 1.959963984540054
WILSON_N = list(range(41)) + [57, 100, 333, 999, 1000]


def wilson_cases() -> list[tuple[int, int]]:
    return [(k, n) for n in WILSON_N for k in range(n + 1)]


def scipy_low(k: int, n: int) -> float:
    return binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson").low


def test_wilson_reference_against_scipy() -> None:
    scipy_params = {**P, "effectiveness": {**P["effectiveness"], "z": SCIPY_Z}}
    rng = random.Random(4)
    cases = [(k, n) for k, n in wilson_cases() if n <= 40 or rng.random() < 0.05]
    for k, n in cases:
        if n == 0:
            continue
        s = scipy_low(k, n)
        assert abs(ref.effectiveness_score(k, n - k, 0, P) - s) < 1e-4, (k, n)
        assert math.isclose(
            ref.effectiveness_score(k, n - k, 0, scipy_params), s, rel_tol=1e-12, abs_tol=1e-12
        ), (k, n)


def test_wilson_reference_special_cases() -> None:
    assert ref.effectiveness_score(0, 0, 0, P) == 0.5
    for n in (1, 2, 10, 1000):
        assert ref.effectiveness_score(0, n, 0, P) == ref.effectiveness_score(0, 0, n, P)
        assert ref.effectiveness_score(0, 0, n, P) < 1e-12  # neutral-only: like all negative
        # all positive: n / (n + z^2)
        assert math.isclose(ref.effectiveness_score(n, 0, 0, P), n / (n + 1.96**2), rel_tol=1e-12)
    # neutral and negative records are the same to the seed (only positiveCount and total are used)
    assert ref.effectiveness_score(3, 2, 5, P) == ref.effectiveness_score(3, 7, 0, P)


def test_effectiveness_against_reference_and_scipy() -> None:
    rows = [row(f"k{k:04d}n{n:04d}", pos=k, apps=n) for k, n in wilson_cases()]
    got = check_against_reference(rows)
    assert got["k0000n0000"]["effectiveness_score"] == 0.5  # no applications
    rng = random.Random(5)
    for k, n in wilson_cases():
        if n == 0 or (n > 40 and rng.random() > 0.05):
            continue
        g = got[f"k{k:04d}n{n:04d}"]["effectiveness_score"]
        assert abs(g - scipy_low(k, n)) < 1e-4, (k, n, g, scipy_low(k, n))
    for n in (1, 10, 1000):
        assert got[f"k0000n{n:04d}"]["effectiveness_score"] < 1e-12  # all negative / neutral
        assert math.isclose(
            got[f"k{n:04d}n{n:04d}"]["effectiveness_score"], n / (n + 1.96**2), rel_tol=1e-12
        )  # all positive


# --------------------------------------------------------------------------------------------
# 维度三：人工分
# --------------------------------------------------------------------------------------------


def test_human_reference_by_hand() -> None:
    assert ref.human_score(0, 0, False, P) == 0.5
    assert ref.human_score(0, 0, True, P) == 0.95
    assert ref.human_score(30, 30, True, P) == 0.95
    assert math.isclose(ref.human_score(1, 0, False, P), 0.575)
    assert math.isclose(ref.human_score(0, 1, False, P), 0.425)
    assert math.isclose(ref.human_score(1, 1, False, P), 0.575 * 0.85)  # approvals first
    for a in range(31):
        for r in range(31):
            closed = (1 - 0.5 * 0.85**a) * 0.85**r  # the spec's closed form
            assert math.isclose(ref.human_score(a, r, False, P), closed, rel_tol=1e-12)


def test_human_score_against_the_seed_loop() -> None:
    rows = [
        row(f"a{a:02d}r{r:02d}{'R' if flag else '-'}", appr=a, rej=r, reflect=flag)
        for a in range(31)
        for r in range(31)
        for flag in (False, True)
    ]
    got = check_against_reference(rows)
    assert got["a00r00-"]["human_score"] == 0.5
    for a in range(31):
        for r in range(31):
            assert got[f"a{a:02d}r{r:02d}R"]["human_score"] == 0.95


# --------------------------------------------------------------------------------------------
# 复合评分: the x0.7 penalty around min = 0.2
# --------------------------------------------------------------------------------------------

BELOW_02 = math.nextafter(0.2, 0)


def test_composite_reference_penalty_edge_and_no_clamp() -> None:
    plain = 0.2 * 0.35 + 0.5 * 0.40 + 0.5 * 0.25
    assert ref.composite_confidence(0.2, 0.5, 0.5, P) == plain  # min exactly 0.2: no penalty
    for dims in ((BELOW_02, 0.5, 0.5), (0.5, BELOW_02, 0.5), (0.5, 0.5, BELOW_02)):
        f, e, h = dims
        assert ref.composite_confidence(f, e, h, P) == (f * 0.35 + e * 0.40 + h * 0.25) * 0.7
    # the penalised value is returned unclamped (the seed), the other branch is clamped
    unclamped = (3.0 * 0.35 + 3.0 * 0.40 + 0.1 * 0.25) * 0.7
    assert ref.composite_confidence(3.0, 3.0, 0.1, P) == unclamped
    assert ref.composite_confidence(3.0, 3.0, 0.1, P) > 1
    assert ref.composite_confidence(3.0, 3.0, 3.0, P) == 1.0
    assert ref.composite_confidence(-1.0, 0.5, 0.5, P) < 0  # penalised: not clamped at 0 either


# dimension values closest to 0.2 on either side that counts can produce (searched with the
# reference: reviews 0..30, applications 1..100), with the other two dimensions at 0.5
PENALTY_CASES = {
    # name: (row kwargs, penalised?)
    "freq_0.3": (dict(obs=1, contr=0), False),
    # 0.3 - 1 * 0.1 = 0.19999999999999998 in JS doubles: below 0.2, penalised (the seed as run)
    "freq_0.3_minus_0.1": (dict(obs=1, contr=1), True),
    "freq_0.5_minus_0.3": (dict(obs=3, contr=3), True),  # 0.19999999999999996
    "freq_0.7_minus_0.5": (dict(obs=6, contr=5), True),  # 0.19999999999999996
    "human_above": (dict(appr=8, rej=9), False),  # 0.200060234632876
    "human_below": (dict(appr=30, rej=10), True),  # 0.19612325371577694
    "eff_above": (dict(pos=24, apps=84), False),  # 0.20014898610655452
    "eff_below": (dict(pos=14, apps=44), True),  # 0.19999129931673562
}


def test_composite_penalty_around_0_2_through_counts() -> None:
    rows = [row(name, **{"obs": 3, **kw}) for name, (kw, _) in PENALTY_CASES.items()]
    got = check_against_reference(rows)
    for name, (_, penalised) in PENALTY_CASES.items():
        g = got[name]
        f, e, h = g["frequency_score"], g["effectiveness_score"], g["human_score"]
        assert (min(f, e, h) < 0.2) == penalised, name
        plain = f * 0.35 + e * 0.40 + h * 0.25
        want = plain * 0.7 if penalised else plain
        assert close(g["composite"], want), (name, want, g["composite"])
    assert got["freq_0.3_minus_0.1"]["frequency_score"] == 0.3 - 0.1


# --------------------------------------------------------------------------------------------
# 应用阈值策略: tiers
# --------------------------------------------------------------------------------------------

TIERS = [
    (0.8, "core", "system_prompt_prepend"),
    (0.6, "strong", "context_suggestion"),
    (0.4, "moderate", "on_demand"),
    (0.2, "tentative", "none"),
    (0.0, "deprecated", "none"),
]


def test_tier_reference_at_and_below_every_edge() -> None:
    for i, (edge, tier, method) in enumerate(TIERS[:-1]):
        assert ref.tier_of(edge, P) == (tier, method)  # [lo, hi): the edge is the upper tier
        assert ref.tier_of(math.nextafter(edge, 0), P) == TIERS[i + 1][1:]
    assert ref.tier_of(1.0, P) == ("core", "system_prompt_prepend")
    assert ref.tier_of(0.0, P) == ("deprecated", "none")
    assert ref.tier_of(-0.1, P) == ("deprecated", "none")


# composites closest to each edge from above and from below that counts can produce (search with
# the reference; see the module docstring). (observations, contradictions), (positive,
# applications), (approvals, rejections) -> composite
EDGE_CASES = {
    "0.2_above": ((21, 6), (103, 221), (58, 28), 0.20000000015718575),
    "0.2_below": ((1, 0), (15, 136), (54, 3), 0.19999999998477053),
    "0.4_above": ((11, 3), (212, 220), (29, 22), 0.4000000006354624),
    "0.4_below": ((6, 0), (222, 261), (12, 23), 0.39999999965292693),
    "0.6_above": ((11, 0), (46, 86), (40, 4), 0.6000000001649313),
    "0.6_below": ((11, 2), (184, 258), (29, 5), 0.5999999959124261),
    "0.8_above": ((21, 0), (203, 228), (34, 4), 0.8000000008838093),
    "0.8_below": ((6, 0), (208, 216), (8, 1), 0.7999999990216274),
}


def edge_rows() -> list[dict[str, Any]]:
    return [
        row(name, obs=o, contr=c, pos=k, apps=n, appr=a, rej=r)
        for name, ((o, c), (k, n), (a, r), _) in EDGE_CASES.items()
    ]


def test_edge_cases_are_what_they_claim() -> None:
    for r in edge_rows():
        edge, side = float(r["instinct_id"][:3]), r["instinct_id"][4:]
        c = ref.score_row(r, P)["composite"]
        assert c == EDGE_CASES[r["instinct_id"]][3]
        assert (c >= edge) == (side == "above") and abs(c - edge) < 1e-8


def test_tiers_just_above_and_below_every_edge() -> None:
    got = check_against_reference(edge_rows())
    names = {e: t for e, t, _ in TIERS}
    lower = {0.2: "deprecated", 0.4: "tentative", 0.6: "moderate", 0.8: "strong"}
    for name in EDGE_CASES:
        edge = float(name[:3])
        want = names[edge] if name.endswith("above") else lower[edge]
        assert got[name]["tier"] == want, (name, got[name])


def test_random_counts_against_reference() -> None:
    rng = random.Random(2026)
    rows = []
    for i in range(3000):
        apps = rng.choice([0, rng.randint(0, 12), rng.randint(0, 400)])
        rows.append(
            row(
                f"r{i:05d}",
                obs=rng.choice([rng.randint(0, 25), rng.randint(0, 300)]),
                contr=rng.choice([0, 0, rng.randint(0, 12)]),
                pos=rng.randint(0, apps),
                apps=apps,
                appr=rng.randint(0, 40),
                rej=rng.choice([0, rng.randint(0, 40)]),
                reflect=rng.random() < 0.15,
            )
        )
    got = check_against_reference(rows)
    assert {g["tier"] for g in got.values()} == {t for _, t, _ in TIERS}


# --------------------------------------------------------------------------------------------
# UPDATE_RULES: replay_events
# --------------------------------------------------------------------------------------------


def ev(iid: str, eid: str, etype: str, minutes: int) -> dict[str, Any]:
    return {
        "instinct_id": iid,
        "event_id": eid,
        "event_type": etype,
        "occurred_at": T0 + pd.Timedelta(minutes=minutes),
    }


def run_replay(
    events: list[dict[str, Any]], start: dict[str, ref.Scores] | None = None
) -> list[dict[str, Any]]:
    """replay_events on the events (and start scores); checks columns; the rows, in order."""
    frame = pd.DataFrame(events, columns=["instinct_id", "event_id", "event_type", "occurred_at"])
    frame["occurred_at"] = pd.to_datetime(frame["occurred_at"])
    start_frame = None
    if start is not None:
        start_frame = pd.DataFrame(
            [(iid, *(float(s) for s in scores)) for iid, scores in start.items()],
            columns=["instinct_id", *SCORES],
        )
    out = replay_events(frame, start=start_frame)
    assert list(out.columns) == REPLAY_COLUMNS
    return out.to_dict("records")


def check_replay(
    events: list[dict[str, Any]], start: dict[str, ref.Scores] | None = None
) -> list[dict[str, Any]]:
    got = run_replay(events, start)
    want = ref.replay_rows(events, P, start)
    order = [(w["instinct_id"], w["event_id"]) for w in want]
    assert [(g["instinct_id"], g["event_id"]) for g in got] == order, (
        "order: instinct_id, occurred_at, event_id"
    )
    bad = [
        (w, {c: g[c] for c in SCORES})
        for g, w in zip(got, want, strict=True)
        if g["event_type"] != w["event_type"] or any(g[c] != float(w[c]) for c in SCORES)
    ]
    assert not bad, "expected (exact decimals), got:\n" + "\n".join(map(repr, bad[:20]))
    return got


def D(*xs: str) -> ref.Scores:
    return tuple(Decimal(x) for x in xs)  # type: ignore[return-value]


def test_replay_reference_clamps_after_every_event() -> None:
    out = ref.replay(D("0.95", "0.5", "0.5"), ["causal_link_confirmed", "pattern_contradicted"], P)
    assert out == [D("1", "0.5", "0.5"), D("0.9", "0.5", "0.5")]
    out = ref.replay(
        D("0.3", "0.05", "0.1"),
        ["applied_failed", "applied_successfully", "user_corrected", "reflect_approved"],
        P,
    )
    assert out == [
        D("0.3", "0", "0.1"),
        D("0.3", "0.08", "0.1"),
        D("0.3", "0", "0"),
        D("0.3", "0", "0.3"),
    ]
    assert ref.initial_scores(P) == D("0.30", "0.50", "0.50")


def test_replay_clamps_at_1_and_0_mid_sequence() -> None:
    events = [
        ev("a", "a-e1", "causal_link_confirmed", 1),
        ev("a", "a-e2", "pattern_contradicted", 2),
        ev("b", "b-e1", "applied_failed", 1),
        ev("b", "b-e2", "applied_successfully", 2),
        ev("b", "b-e3", "user_corrected", 3),
        ev("b", "b-e4", "user_accepted", 4),
        ev("c", "c-e1", "reflect_approved", 1),
        ev("c", "c-e2", "reflect_approved", 2),
        ev("c", "c-e3", "reflect_rejected", 3),
    ]
    start = {
        "a": D("0.95", "0.5", "0.5"),
        "b": D("0.3", "0.05", "0.1"),
        "c": D("0.3", "0.5", "0.5"),
    }
    got = check_replay(events, start)
    assert [g["freq_score"] for g in got[:2]] == [1.0, 0.9]  # not 0.95
    assert [(g["eff_score"], g["human_score"]) for g in got[2:6]] == [
        (0.0, 0.1),
        (0.08, 0.1),
        (0.0, 0.0),
        (0.05, 0.1),
    ]
    assert [g["human_score"] for g in got[6:]] == [0.8, 1.0, 0.7]


def test_replay_default_start_is_the_policy_initial() -> None:
    got = check_replay([ev("x", "e1", "weekly_decay", 0)])
    assert (got[0]["freq_score"], got[0]["eff_score"], got[0]["human_score"]) == (0.28, 0.49, 0.495)


def test_replay_order_by_occurred_at_then_event_id() -> None:
    # given shuffled; ties on occurred_at are broken by event_id as text ("b-e10" < "b-e9");
    # event_id is unique across instincts
    events = [
        ev("b", "b-e9", "pattern_contradicted", 5),
        ev("a", "a-e2", "causal_link_confirmed", 7),
        ev("b", "b-e10", "causal_link_confirmed", 5),
        ev("a", "a-e1", "pattern_contradicted", 9),
        ev("b", "b-e1", "pattern_observed_again", 6),
        ev("a", "a-e3", "pattern_contradicted", 7),
        ev("b", "b-e0", "weekly_decay", 1),
    ]
    start = {"a": D("0.95", "0.5", "0.5"), "b": D("0.95", "0.5", "0.5")}
    got = check_replay(events, start)
    assert [(g["instinct_id"], g["event_id"]) for g in got] == [
        ("a", "a-e2"),
        ("a", "a-e3"),
        ("a", "a-e1"),
        ("b", "b-e0"),
        ("b", "b-e10"),
        ("b", "b-e9"),
        ("b", "b-e1"),
    ]
    # a: 0.95 +0.10 -> 1 (clamped), -0.10 -> 0.9, -0.10 -> 0.8 (order matters through the clamp)
    assert [g["freq_score"] for g in got[:3]] == [1.0, 0.9, 0.8]
    assert [g["freq_score"] for g in got[3:]] == [0.93, 1.0, 0.9, 0.95]


def test_weekly_decay_200_times_floors_at_zero() -> None:
    events = [ev("d", f"w{i:03d}", "weekly_decay", 7 * 24 * 60 * i) for i in range(200)]
    got = check_replay(events)
    assert got[14]["freq_score"] == 0.0 and got[13]["freq_score"] == 0.02  # 0.30 / 0.02 = 15
    assert got[49]["eff_score"] == 0.0 and got[48]["eff_score"] == 0.01
    assert got[99]["human_score"] == 0.0 and got[98]["human_score"] == 0.005
    assert all(g[c] >= 0 for g in got for c in SCORES)
    assert (got[-1]["freq_score"], got[-1]["eff_score"], got[-1]["human_score"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_sequences_equal_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    iids = [f"inst{n:02d}" for n in range(20)]
    start = {
        iid: D(
            *(
                str(rng.choice([rng.randint(0, 1000), 0, 1000, 950, 50]) / Decimal(1000))
                for _ in range(3)
            )
        )
        for iid in iids
        if rng.random() < 0.6
    }
    events = [
        ev(rng.choice(iids), f"e{i}", rng.choice(EVENT_TYPES), rng.randint(0, 120))
        for i in range(500)
    ]  # ~4 events a minute per instinct: many ties on occurred_at
    rng.shuffle(events)
    # instincts absent from `start` start at the policy's initial scores
    full = {i: start.get(i, ref.initial_scores(P)) for i in iids}
    check_replay(events, start if seed % 2 else full)


# --------------------------------------------------------------------------------------------
# The oracle shares no parameter with the code
# --------------------------------------------------------------------------------------------

ONE_CHANGE: dict[str, dict[str, Any]] = {
    "weight": {"weights": {"frequency": 0.40, "effectiveness": 0.35}},
    "frequency bin": {
        "frequency": {
            "bins": [
                {"at_most": 3, "base": 0.30},
                {"at_most": 5, "base": 0.50},
                {"at_most": 10, "base": 0.70},
                {"at_most": 20, "base": 0.85},
            ]
        }
    },
    "learning rate": {"human": {"learning_rate": 0.16}},
    "tier edge": {
        "tiers": [
            {"tier": "core", "at_least": 0.8, "injection_method": "system_prompt_prepend"},
            {"tier": "strong", "at_least": 0.65, "injection_method": "context_suggestion"},
            {"tier": "moderate", "at_least": 0.4, "injection_method": "on_demand"},
            {"tier": "tentative", "at_least": 0.2, "injection_method": "none"},
            {"tier": "deprecated", "at_least": 0.0, "injection_method": "none"},
        ]
    },
    "update rule": {"update_rules": {"pattern_observed_again": [0.06, 0.0, 0.0]}},
}
"""One number of the packaged policy changed at a time (a policy that `extends` instinct_v1)."""


def changed_policy(folder: Path, parameters: dict[str, Any]) -> str:
    path = folder / "instinct_changed.yaml"
    document = {
        "instinct_policy_version": "instinct_changed",
        "extends": "instinct_v1",
        "parameters": parameters,
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def disagreements(policy: str) -> int:
    """Rows and replayed events where the code under ``policy`` differs from the oracle."""
    rng = random.Random(37)
    rows = [
        row(f"i{n:03d}", obs=n % 25, contr=n % 3, pos=n % 5 % (n % 9 + 1), apps=n % 9, appr=n % 4)
        for n in range(200)
    ]
    frame = score_counts(counts_frame(rows), policy)
    got = {g["instinct_id"]: g for g in frame.to_dict("records")}
    bad = sum(
        any(
            got[r["instinct_id"]][col] != want[col]
            if col in ("tier", "injection_method")
            else not close(got[r["instinct_id"]][col], want[col])
            for col in [*FLOATS, "tier", "injection_method"]
        )
        for r in rows
        for want in [ref.score_row(r, P)]
    )
    events = [ev("a", f"e{i:03d}", rng.choice(EVENT_TYPES), i) for i in range(60)]
    frame = pd.DataFrame(events)
    replayed = replay_events(frame, policy).to_dict("records")
    want_replay = ref.replay_rows(events, P)
    bad += sum(
        any(g[c] != float(w[c]) for c in SCORES) for g, w in zip(replayed, want_replay, strict=True)
    )
    return bad


@pytest.mark.parametrize("change", sorted(ONE_CHANGE))
def test_the_oracle_disagrees_with_a_changed_policy(change: str, tmp_path: Path) -> None:
    """The oracle reads its own frozen copy of the seed's numbers: the code with one packaged
    number changed must disagree with it, the code with the packaged policy agree."""
    assert disagreements(changed_policy(tmp_path, ONE_CHANGE[change])) > 0


def test_the_oracle_agrees_with_the_packaged_policy() -> None:
    assert disagreements("instinct_v1") == 0
