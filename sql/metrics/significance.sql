{#-
Comparing two runs (`duckscore eval --baseline`): per metric, the mean of each run over the
evaluated queries, their difference, and what the paired two-sided test needs.
Reads `inputs.paired` (metric, query_id, run_value, baseline_value: one row per metric and
evaluated query, both runs judged by the same qrels). Context: `test` (randomization or t-test),
`permutations`, `seed`.

randomization (Fisher's, as ranx's `compare(stat_test="fisher")` and Smucker et al., CIKM '07):
each permutation swaps the two runs' values of each query with probability 1/2 (the sign of the
query's difference flips), chosen by the top bit of hash('seed/permutation/query_id') (one
string: the low bits of a hash of several values are not independent): the same permutations on
every run of one DuckDB version, whatever the threads. The p-value is the share of
permutations whose |mean difference| is at least the observed one, compared as exact DECIMAL
sums (the identity permutation ties the observed sum exactly, whatever the order of addition).
t-test: the mean and sample standard deviation of the differences; the runner turns them into
Student's t and its two-sided p-value (n − 1 degrees of freedom).
-#}
WITH
differences AS (
    SELECT
        metric, query_id, run_value, baseline_value,
        run_value - baseline_value AS difference,
        -- exact sums whatever the order (a permutation's sum is compared with the observed)
        CAST(run_value - baseline_value AS DECIMAL(38, 18)) AS exact_difference
    FROM {{ inputs.paired | ident }}
),
observed AS (
    SELECT
        metric,
        count(*) AS queries,
        sum(run_value ORDER BY query_id ASC NULLS LAST) / NULLIF(count(*), 0) AS run_mean,
        sum(baseline_value ORDER BY query_id ASC NULLS LAST) / NULLIF(count(*), 0) AS baseline_mean,
        sum(difference ORDER BY query_id ASC NULLS LAST) / NULLIF(count(*), 0) AS difference,
        stddev_samp(difference) AS difference_sd,
        abs(sum(exact_difference)) AS observed_sum
    FROM differences
    GROUP BY metric
),
{% if test == 'randomization' %}
permuted AS (
    SELECT
        d.metric,
        p.permutation,
        abs(sum(
            CASE WHEN hash(concat_ws('/', {{ seed | lit }}, p.permutation, d.query_id)) >> 63 = 0
                 THEN d.exact_difference ELSE -d.exact_difference END
        )) AS permuted_sum
    FROM differences AS d
    CROSS JOIN range({{ permutations | lit }}) AS p(permutation)
    GROUP BY d.metric, p.permutation
),
tested AS (
    SELECT
        o.metric,
        CAST(count(*) FILTER (WHERE x.permuted_sum >= o.observed_sum) AS DOUBLE)
            / {{ permutations | lit }} AS p_value
    FROM observed AS o
    JOIN permuted AS x ON x.metric = o.metric
    GROUP BY o.metric
)
SELECT o.* EXCLUDE (observed_sum), t.p_value
FROM observed AS o
JOIN tested AS t ON t.metric = o.metric
{% else %}
tested AS (
    SELECT * EXCLUDE (observed_sum), CAST(NULL AS DOUBLE) AS p_value FROM observed
)
SELECT * FROM tested
{% endif %}
ORDER BY metric
