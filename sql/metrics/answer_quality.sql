{#-
Each score_policy_version regressed against answer quality (seed 000 §11, `duckscore eval
--answers-quality`): are its `high` answers more faithful than its `low` ones, are its `low`
(web-routed) answers the ones that needed the web?

Reads `inputs.scored` (score_policy_version, query_id, confidence_level, need_hitl, web_fallback,
and `actions` when `has_actions`: the contract lines of the scored folders) and `inputs.quality`
(query_id, one column per name of `metrics`, needed_web, needed_clarification: NULL where not
evaluated). Context: `metrics` (the quality columns given), `has_actions`, `side_by_side` (two
versions or more: also the scope `common`, the queries every version scored), `exact_max_n`
(a pool of at most this many queries is tested exactly: all its 2^n splits), `permutations`,
`seed`, `final` (the stage selected: level_stats, routing, tests or needs).

Permutation test, one-sided, per version and metric: the pool is the version's `high` and `low`
queries with a value; the statistic is the `high` group's sum (with the group sizes fixed, a
larger sum is a larger mean difference high − low), summed as exact DECIMAL so the observed split
ties itself whatever the order. A pool of n ≤ exact_max_n is split every way (each mask with
n_high bits set): p = share of splits at least as extreme. A larger pool draws `permutations`
random splits (the first n_high queries by hash('seed/permutation/query_id')), and p =
(as extreme + 1) / (permutations + 1), never 0 (Phipson & Smyth 2010).
-#}
WITH
scored AS (
    SELECT
        score_policy_version AS version,
        query_id,
        confidence_level AS level,
        need_hitl,
        web_fallback,
        {% if has_actions %}coalesce(list_contains(actions, 'clarify'), FALSE){% else %}FALSE{% endif %} AS clarify
    FROM {{ inputs.scored | ident }}
),
version_counts AS (
    SELECT count(*) AS n_versions
    FROM (SELECT version FROM scored GROUP BY version) AS v
),
common_queries AS (
    SELECT s.query_id
    FROM scored AS s
    CROSS JOIN version_counts AS c
    GROUP BY s.query_id, c.n_versions
    HAVING count(*) = c.n_versions
),
in_scope AS (
    SELECT 'all' AS scope, s.* FROM scored AS s
    {% if side_by_side %}
    UNION ALL
    SELECT 'common' AS scope, s.*
    FROM scored AS s
    SEMI JOIN common_queries AS c ON c.query_id = s.query_id
    {% endif %}
),
joined AS (
    SELECT
        i.*,
        {% for metric in metrics %}q.{{ metric | ident }},{% endfor %}
        q.needed_web,
        q.needed_clarification
    FROM in_scope AS i
    LEFT JOIN {{ inputs.quality | ident }} AS q ON q.query_id = i.query_id
),
long_values AS (
    {% for metric in metrics %}
    SELECT scope, version, level, query_id, {{ metric | lit }} AS metric, {{ metric | ident }} AS value
    FROM joined
    {% if not loop.last %}UNION ALL{% endif %}
    {% endfor %}
),
level_stats AS (
    SELECT
        scope,
        version,
        level,
        metric,
        count(*) AS n_queries,
        count(value) AS n_evaluated,
        sum(value ORDER BY query_id ASC NULLS LAST) / NULLIF(count(value), 0) AS mean,
        stddev_samp(value) AS sd
    FROM long_values
    GROUP BY scope, version, level, metric
),
routing AS (
    SELECT
        scope,
        version,
        level,
        count(*) AS n_queries,
        count(*) FILTER (WHERE {% for metric in metrics %}{{ metric | ident }} IS NOT NULL{% if not loop.last %} OR {% endif %}{% endfor %}) AS n_evaluated,
        count(*) FILTER (WHERE web_fallback) / NULLIF(count(*), 0) AS share_web,
        count(*) FILTER (WHERE need_hitl) / NULLIF(count(*), 0) AS share_hitl,
        count(*) FILTER (WHERE clarify) / NULLIF(count(*), 0) AS share_clarify,
        count(needed_web) AS n_needed_web_known,
        count(*) FILTER (WHERE needed_web) / NULLIF(count(needed_web), 0) AS share_needed_web,
        count(needed_clarification) AS n_needed_clarification_known,
        count(*) FILTER (WHERE needed_clarification) / NULLIF(count(needed_clarification), 0)
            AS share_needed_clarification
    FROM joined
    GROUP BY scope, version, level
),
needs AS (
    -- routed = what the policy did, needed = what the answer in fact needed
    SELECT
        version,
        need,
        count(*) FILTER (WHERE routed AND needed) AS routed_and_needed,
        count(*) FILTER (WHERE routed) AS routed,
        count(*) FILTER (WHERE needed) AS needed,
        count(*) AS known,
        count(*) FILTER (WHERE routed AND needed) / NULLIF(count(*) FILTER (WHERE routed), 0)
            AS routing_precision,
        count(*) FILTER (WHERE routed AND needed) / NULLIF(count(*) FILTER (WHERE needed), 0)
            AS routing_recall
    FROM (
        SELECT version, 'web' AS need, web_fallback AS routed, needed_web AS needed
        FROM joined
        WHERE scope = 'all' AND needed_web IS NOT NULL
        UNION ALL
        SELECT version, 'clarification' AS need, need_hitl OR clarify AS routed,
            needed_clarification AS needed
        FROM joined
        WHERE scope = 'all' AND needed_clarification IS NOT NULL
    ) AS known_needs
    GROUP BY version, need
),
pool AS (
    SELECT
        version,
        metric,
        query_id,
        level = 'high' AS is_high,
        CAST(value AS DECIMAL(38, 18)) AS exact_value,
        row_number() OVER (
            PARTITION BY version, metric ORDER BY query_id ASC NULLS LAST
        ) - 1 AS slot
    FROM long_values
    WHERE scope = 'all' AND level IN ('high', 'low') AND value IS NOT NULL
),
pool_sizes AS (
    SELECT
        version,
        metric,
        count(*) AS n,
        count(*) FILTER (WHERE is_high) AS n_high,
        sum(exact_value) FILTER (WHERE is_high) AS observed_sum,
        count(*) <= {{ exact_max_n | lit }} AS exact
    FROM pool
    GROUP BY version, metric
),
testable AS (
    SELECT * FROM pool_sizes WHERE n_high > 0 AND n_high < n
),
exact_splits AS (
    SELECT t.version, t.metric, m.mask AS split
    FROM testable AS t, range(CAST(1 AS BIGINT) << t.n) AS m(mask)
    WHERE t.exact AND bit_count(m.mask) = t.n_high
),
exact_sums AS (
    SELECT
        s.version,
        s.metric,
        s.split,
        sum(p.exact_value) FILTER (WHERE (s.split >> p.slot) & 1 = 1) AS high_sum
    FROM exact_splits AS s
    JOIN pool AS p ON p.version = s.version AND p.metric = s.metric
    GROUP BY s.version, s.metric, s.split
),
random_draws AS (
    SELECT
        p.version,
        p.metric,
        r.split,
        p.exact_value,
        t.n_high,
        row_number() OVER (
            PARTITION BY p.version, p.metric, r.split
            ORDER BY hash(concat_ws('/', {{ seed | lit }}, r.split, p.query_id)) ASC NULLS LAST,
                p.query_id ASC NULLS LAST
        ) AS draw
    FROM pool AS p
    JOIN testable AS t ON t.version = p.version AND t.metric = p.metric
    CROSS JOIN range({{ permutations | lit }}) AS r(split)
    WHERE NOT t.exact
),
random_sums AS (
    SELECT version, metric, split, sum(exact_value) FILTER (WHERE draw <= n_high) AS high_sum
    FROM random_draws
    GROUP BY version, metric, split
),
splits AS (
    SELECT * FROM exact_sums
    UNION ALL
    SELECT * FROM random_sums
),
tests AS (
    SELECT
        t.version,
        t.metric,
        t.n_high,
        t.n - t.n_high AS n_low,
        t.exact,
        count(*) AS splits,
        count(*) FILTER (WHERE x.high_sum >= t.observed_sum) AS as_extreme,
        CASE WHEN t.exact
            THEN count(*) FILTER (WHERE x.high_sum >= t.observed_sum) / NULLIF(count(*), 0)
            ELSE (count(*) FILTER (WHERE x.high_sum >= t.observed_sum) + 1)
                / ({{ permutations | lit }} + 1)
        END AS p_value
    FROM testable AS t
    JOIN splits AS x ON x.version = t.version AND x.metric = t.metric
    GROUP BY t.version, t.metric, t.n, t.n_high, t.exact
)
SELECT * FROM {{ final | ident }}
