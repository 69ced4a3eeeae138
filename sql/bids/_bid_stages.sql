{#-
Seed 002's stages as named CTEs, query normalisation … evaluation_results (a macro shared by
bids.sql, contract.sql and gates.sql). Inputs are the typed views of orchestrator/bids/tables.py.
Patterns and character maps are values built by the runner (through `lit`); user conditions and rule
expressions arrive compiled by orchestrator/bids/whitelist.py (through `fragment`: whitelisted field
names, fixed operators and `$name` placeholders only), their literals bound as parameters.
Tenant isolation: every join to chunks or bid_fields carries the query's (or evaluation's)
tenant_id, so no row of another tenant can meet a row of this one.
-#}
{% macro tokens(text) -%}
list_transform(
    regexp_extract_all({{ text }}, {{ token_pattern | lit }}),
    lambda tok: CASE
        WHEN regexp_full_match(tok, {{ date_pattern | lit }})
             AND try(make_date(
                 CAST(regexp_extract_all(tok, '[0-9]+')[1] AS BIGINT),
                 CAST(regexp_extract_all(tok, '[0-9]+')[2] AS BIGINT),
                 CAST(regexp_extract_all(tok, '[0-9]+')[3] AS BIGINT))) IS NOT NULL
            THEN {'t': strftime(make_date(
                 CAST(regexp_extract_all(tok, '[0-9]+')[1] AS BIGINT),
                 CAST(regexp_extract_all(tok, '[0-9]+')[2] AS BIGINT),
                 CAST(regexp_extract_all(tok, '[0-9]+')[3] AS BIGINT)), '%Y-%m-%d'), 'kind': 'date'}
        WHEN regexp_full_match(tok, {{ number_pattern | lit }}) AND regexp_matches(tok, '[万亿]$')
            THEN {'t': coalesce(try(regexp_replace(CAST(
                     CAST(replace(regexp_replace(tok, '[万亿]$', ''), ',', '') AS DECIMAL(38, 10))
                     * CASE WHEN suffix(tok, '万') THEN 10000 ELSE 100000000 END AS VARCHAR), '\.?0+$', '')), tok),
                  'kind': 'number'}
        WHEN regexp_full_match(tok, {{ number_pattern | lit }})
            THEN {'t': CASE WHEN contains(tok, '.') THEN regexp_replace(replace(tok, ',', ''), '\.?0+$', '')
                            ELSE replace(tok, ',', '') END,
                  'kind': 'number'}
        ELSE {'t': tok, 'kind': 'text'}
    END)
{%- endmacro %}
{% macro text_of(token_list) -%}
array_to_string(list_transform({{ token_list }}, lambda e: e.t), '')
{%- endmacro %}
{% macro constraints_of(token_list, kind) -%}
list_transform(list_filter({{ token_list }}, lambda e: e.kind = {{ kind | lit }}), lambda e: e.t)
{%- endmacro %}
{% macro lost_constraints(kept='rewritten_numbers || rewritten_times') -%}
{#- the numbers and dates of the query the rewrite lost, as a multiset difference -#}
list_transform(
            list_filter(
                list_transform(numeric_constraints || time_constraints, lambda x, i: {'x': x, 'i': i}),
                lambda e: len(list_filter((numeric_constraints || time_constraints)[1:e.i], lambda y: y = e.x))
                          > len(list_filter({{ kept }}, lambda y: y = e.x))),
            lambda e: e.x)
{%- endmacro %}
{% macro scope_lost(terms, text) -%}
{#- the must-include and must-exclude terms a text's own terms lack (nor their standard names),
    and the entities it does not name -#}
list_filter(must_include_terms || must_exclude_terms,
                        lambda term: NOT list_contains({{ terms }}, term)
                                     AND NOT list_contains({{ terms }}, {{ with_synonyms('term', 'synonym_pattern', 'synonym_map') }}))
                || list_filter(entity_constraints, lambda entity: NOT contains({{ text }}, entity))
{%- endmacro %}
{% macro repeated(pieces, i) -%}
{#- piece i is a term (no separator) that an earlier piece already is -#}
(NOT regexp_full_match({{ pieces }}[{{ i }}], {{ separator_run | lit }}) AND list_contains({{ pieces }}[1:{{ i }} - 1], {{ pieces }}[{{ i }}]))
{%- endmacro %}
{% macro folded(text) -%}
trim(regexp_replace(lower(translate({{ text }}, {{ full_width | lit }}, {{ half_width | lit }})), '\s+', ' ', 'g'))
{%- endmacro %}
{% macro with_synonyms(text, pattern, synonym_map) -%}
CASE WHEN {{ pattern }} IS NULL THEN {{ text }}
     ELSE array_to_string(list_transform(regexp_extract_all({{ text }}, {{ pattern }}),
         lambda piece: coalesce({{ synonym_map }}[piece], piece)), '') END
{%- endmacro %}
{% macro terms_of(text, patterns) -%}
{%- if patterns -%}
list_sort(list_distinct(list_filter(flatten([
    {%- for pattern in patterns %}regexp_extract_all({{ text }}, {{ pattern | lit }}, 1){{ ', ' if not loop.last }}{% endfor -%}
]), lambda term: trim(term) <> '')))
{%- else -%}
CAST([] AS VARCHAR[])
{%- endif -%}
{%- endmacro %}
{% macro in_list(value, comma_list) -%}
list_contains(list_transform(string_split({{ comma_list }}, ','), lambda item: trim(item)), {{ value }})
{%- endmacro %}
{% macro no_rule_rows() -%}
{#- the typed, named empty tail of a rule union: a policy without rules of a kind still has the columns -#}
SELECT CAST(NULL AS VARCHAR) AS tenant_id, CAST(NULL AS VARCHAR) AS project_id,
           CAST(NULL AS VARCHAR) AS supplier_id, CAST(NULL AS VARCHAR) AS rule_id,
           CAST(NULL AS VARCHAR) AS criteria_id, CAST(NULL AS VARCHAR) AS kind,
           CAST(NULL AS DOUBLE) AS value, CAST(NULL AS BOOLEAN) AS passed,
           CAST(NULL AS BOOLEAN) AS missing_material, CAST(NULL AS VARCHAR[]) AS missing,
           CAST(NULL AS VARCHAR) AS rule_reason
    WHERE FALSE
{%- endmacro %}
{% macro bid_stages() %}
{% set p = policy %}
{% set pk = p.packing %}
{% set cw = p.confidence.weights %}
{#- bid_v3's §3.2 constraint rules and §3.3 rewrite guard; absent, the SQL is bid_v1's -#}
{% set cx = p.get('constraints') %}
{#- bid_v4's §3.2 tender-field rules and §3.3 expression compression; absent, the SQL is bid_v3's -#}
{% set fields = cx.get('tender_fields') if cx else none %}
{% set cz = p.get('compression') %}
{% set query_stage = 'fielded_queries' if fields else ('compressed_queries' if cz else ('guarded_queries' if cx else 'constrained_queries')) %}
{#- bid_v2's HITL reasons (docs/bids.md#what-bid_v2-changes); absent, the SQL is bid_v1's -#}
{% set short_evidence_reviewed = p.hitl.get('insufficient_evidence', False) %}
{% set citation_mapping_reviewed = p.hitl.get('citation_mapping', False) %}
-- §3.1 steps 1-3: width fold, lower case, whitespace
folded_queries AS (
    SELECT
        *,
        trim(regexp_replace(lower(translate(query_text, {{ full_width | lit }}, {{ half_width | lit }})), '\s+', ' ', 'g')) AS query_folded
    FROM queries
),
-- the project dictionaries (§3.1.2): each term and canonical form normalised like the queries
synonym_entries AS (
    SELECT
        tenant_id,
        project_id,
        term,
        canonical,
        {{ text_of(tokens("trim(regexp_replace(lower(translate(term, " ~ (full_width | lit) ~ ", " ~ (half_width | lit) ~ ")), '\\s+', ' ', 'g'))")) }} AS term_norm,
        {{ text_of(tokens("trim(regexp_replace(lower(translate(canonical, " ~ (full_width | lit) ~ ", " ~ (half_width | lit) ~ ")), '\\s+', ' ', 'g'))")) }} AS canonical_norm
    FROM synonyms
),
-- terms of one project that normalise alike but to different canonical forms: the runner refuses
-- the dictionary (orchestrator/bids/tables.py) before any stage reads it
synonym_conflicts AS (
    SELECT tenant_id, project_id, term_norm, term, canonical, canonical_norm
    FROM synonym_entries
    WHERE term_norm <> ''
    WINDOW same_term AS (PARTITION BY tenant_id, project_id, term_norm)
    QUALIFY min(canonical_norm) OVER same_term <> max(canonical_norm) OVER same_term
),
-- one pattern and one map per project; terms that normalise alike to one canonical form are one entry
synonym_sets AS (
    SELECT
        tenant_id,
        project_id,
        string_agg('\Q' || term_norm || '\E', '|' ORDER BY length(term_norm) DESC NULLS LAST, term_norm ASC NULLS LAST) || '|[\s\S]' AS synonym_pattern,
        map_from_entries(list({'k': term_norm, 'v': canonical_norm} ORDER BY term_norm ASC NULLS LAST)) AS synonym_map
    FROM (SELECT DISTINCT tenant_id, project_id, term_norm, canonical_norm FROM synonym_entries)
    WHERE term_norm <> ''
    GROUP BY tenant_id, project_id
),
-- §3.1 step 4 (numbers, amounts, dates) and the one-pass synonym rewrite
tokenized_queries AS (
    SELECT
        q.*,
        {{ tokens('q.query_folded') }} AS norm_tokens,
        s.synonym_pattern,
        s.synonym_map
    FROM folded_queries AS q
    LEFT JOIN synonym_sets AS s ON s.tenant_id = q.tenant_id AND s.project_id = q.project_id
),
rewritten_queries AS (
    SELECT
        *,
        {{ text_of('norm_tokens') }} AS query_norm,
        CASE WHEN synonym_pattern IS NULL THEN {{ text_of('norm_tokens') }}
             ELSE array_to_string(list_transform(
                 regexp_extract_all({{ text_of('norm_tokens') }}, synonym_pattern),
                 lambda piece: coalesce(synonym_map[piece], piece)), '')
        END AS rewritten_query
    FROM tokenized_queries
),
constrained_queries AS (
    SELECT
        *,
        {{ constraints_of('norm_tokens', 'number') }} AS numeric_constraints,
        {{ constraints_of('norm_tokens', 'date') }} AS time_constraints,
        {{ constraints_of(tokens('rewritten_query'), 'number') }} AS rewritten_numbers,
        {{ constraints_of(tokens('rewritten_query'), 'date') }} AS rewritten_times
    FROM rewritten_queries
),
{% if cx %}
-- §3.2 entity constraints (the project dictionary's entities the query names, by term or by
-- standard name), must-include and must-exclude terms (the policy's patterns), each also in the
-- dictionary's standard names (`*_canon`) as the filters compare them; the rewrite's own, for §3.3
scoped_queries AS (
    SELECT
        q.*,
        coalesce((
            SELECT list_sort(list(DISTINCT e.canonical_norm))
            FROM synonym_entries AS e
            WHERE e.tenant_id = q.tenant_id AND e.project_id = q.project_id AND e.term_norm <> ''
              AND (contains(q.query_norm, e.term_norm) OR contains(q.query_norm, e.canonical_norm))
        ), CAST([] AS VARCHAR[])) AS entity_constraints,
        {{ terms_of('q.query_norm', cx.must_include) }} AS must_include_terms,
        {{ terms_of('q.query_norm', cx.must_exclude) }} AS must_exclude_terms,
        list_transform(must_include_terms, lambda term: {{ with_synonyms('term', 'q.synonym_pattern', 'q.synonym_map') }}) AS include_canon,
        list_transform(must_exclude_terms, lambda term: {{ with_synonyms('term', 'q.synonym_pattern', 'q.synonym_map') }}) AS exclude_canon,
        {{ terms_of('q.rewritten_query', cx.must_include + cx.must_exclude) }} AS rewritten_terms,
        list_transform(
            list_filter(coalesce(regexp_extract_all(q.query_norm, q.synonym_pattern), CAST([] AS VARCHAR[])),
                        lambda piece: q.synonym_map[piece] IS NOT NULL),
            lambda piece: piece || ' -> ' || q.synonym_map[piece]) AS applied_synonyms
    FROM constrained_queries AS q
),
-- §3.3 a rewrite that changes a hard constraint (a number or date lost) or widens the authorised
-- scope (drops a must-include or must-exclude term or an entity) is refused: the normalised
-- query stays, and rewrite_reason says why
guarded_queries AS (
    SELECT
        * REPLACE (
            CASE WHEN rewrite_refused THEN query_norm ELSE rewritten_query END AS rewritten_query,
            CASE WHEN rewrite_refused THEN numeric_constraints ELSE rewritten_numbers END AS rewritten_numbers,
            CASE WHEN rewrite_refused THEN time_constraints ELSE rewritten_times END AS rewritten_times
        ),
        CASE
            WHEN len(attempted_diff) > 0
                THEN 'refused: changes hard constraints (' || array_to_string(attempted_diff, ', ') || ')'
            WHEN len(scope_lost) > 0
                THEN 'refused: widens the authorised scope (drops ' || array_to_string(scope_lost, ', ') || ')'
            WHEN len(applied_synonyms) = 0 THEN 'no rewrite'
            ELSE 'synonyms: ' || array_to_string(applied_synonyms, '; ')
        END AS rewrite_reason
    FROM (
        SELECT
            *,
            {{ lost_constraints() }} AS attempted_diff,
            {{ scope_lost('rewritten_terms', 'rewritten_query') }} AS scope_lost,
            len(attempted_diff) > 0 OR len(scope_lost) > 0 AS rewrite_refused
        FROM scoped_queries
    )
),
{% if cz %}
-- §3.3 expression compression of the guarded rewrite: the policy's filler phrases removed; a
-- term (a run between spaces and separators) that repeats an earlier one dropped with the
-- separator before it; a run of spaces and separators reduced to its first separator (and one
-- space if it held one), else to one space; none at either end
compression_pieces AS (
    SELECT
        *,
        regexp_extract_all(rewritten_query, {{ filler_pattern | lit }}) AS removed_fillers,
        regexp_extract_all(regexp_replace(rewritten_query, {{ filler_pattern | lit }}, '', 'g'), {{ piece_pattern | lit }}) AS pieces
    FROM guarded_queries
),
compression_attempts AS (
    SELECT
        *,
        list_filter(pieces, lambda piece, i: {{ repeated('pieces', 'i') }}) AS duplicate_terms,
        regexp_replace(regexp_replace(regexp_replace(regexp_replace(
            array_to_string(list_filter(pieces, lambda piece, i:
                NOT {{ repeated('pieces', 'i') }} AND NOT (i < len(pieces) AND {{ repeated('pieces', 'i + 1') }})), ''),
            {{ separator_spaced | lit }}, '\1\2 ', 'g'), {{ separator_squeeze | lit }}, '\1', 'g'),
            '\s+', ' ', 'g'), {{ separator_ends | lit }}, '', 'g') AS compressed_text
    FROM compression_pieces
),
-- the compression is refused, the rewrite kept, when it would lose a number, date, term or entity
compressed_queries AS (
    SELECT
        * REPLACE (
            CASE WHEN len(compression_lost) > 0 THEN rewritten_query ELSE compressed_text END AS rewritten_query,
            CASE WHEN len(compression_lost) > 0 THEN rewritten_numbers ELSE compressed_numbers END AS rewritten_numbers,
            CASE WHEN len(compression_lost) > 0 THEN rewritten_times ELSE compressed_times END AS rewritten_times
        ),
        rewritten_query AS uncompressed_query,
        length(rewritten_query) AS uncompressed_length,
        length(CASE WHEN len(compression_lost) > 0 THEN rewritten_query ELSE compressed_text END) AS rewritten_length,
        CASE
            WHEN len(compression_lost) > 0
                THEN 'refused: drops a constraint (' || array_to_string(compression_lost, ', ') || ')'
            WHEN compressed_text = rewritten_query THEN 'no compression'
            ELSE 'compressed: ' || coalesce(nullif(concat_ws('; ',
                CASE WHEN len(removed_fillers) > 0 THEN 'fillers (' || array_to_string(list_sort(list_distinct(removed_fillers)), ', ') || ')' END,
                CASE WHEN len(duplicate_terms) > 0 THEN 'duplicate terms (' || array_to_string(list_sort(list_distinct(duplicate_terms)), ', ') || ')' END), ''),
                'spaces and punctuation')
        END AS compression_reason
    FROM (
        SELECT
            *,
            {{ lost_constraints('compressed_numbers || compressed_times') }}
                || {{ scope_lost('compressed_terms', with_synonyms('compressed_text', 'synonym_pattern', 'synonym_map')) }} AS compression_lost
        FROM (
            SELECT
                *,
                {{ terms_of('compressed_text', cx.must_include + cx.must_exclude) }} AS compressed_terms,
                {{ constraints_of(tokens('compressed_text'), 'number') }} AS compressed_numbers,
                {{ constraints_of(tokens('compressed_text'), 'date') }} AS compressed_times
            FROM compression_attempts
        )
    )
),
{% endif %}
{% if fields %}
-- §3.2 the tender's own fields: each field the policy names, of the query's tenant and project
-- and scoped to its criterion, becomes a constraint of the policy's kind, normalised like a query
-- and in the dictionary's standard name (`value_canon`) as the filters compare it
field_constraints AS (
    SELECT
        query_id, field, kind, value_norm,
        {{ with_synonyms('value_norm', 'synonym_pattern', 'synonym_map') }} AS value_canon
    FROM (
        SELECT
            q.query_id, f.field, r.kind, s.synonym_pattern, s.synonym_map,
            {{ text_of(tokens(folded('f.value'))) }} AS value_norm
        FROM queries AS q
        JOIN tender_fields AS f
          ON f.tenant_id = q.tenant_id AND f.project_id = q.project_id
         AND (f.criteria_scope IS NULL OR {{ in_list('q.criteria_id', 'f.criteria_scope') }})
        JOIN (VALUES {% for field, kind in fields.items() %}({{ field | lit }}, {{ kind | lit }}){{ ', ' if not loop.last }}{% endfor %}) AS r(field, kind)
          ON r.field = f.field
        LEFT JOIN synonym_sets AS s ON s.tenant_id = q.tenant_id AND s.project_id = q.project_id
    )
),
field_constraint_sets AS (
    SELECT
        query_id,
        {% for kind, column in (('entity', 'value_canon'), ('must_include', 'value_norm'), ('must_include', 'value_canon'), ('must_exclude', 'value_norm'), ('must_exclude', 'value_canon')) %}
        coalesce(list({{ column }} ORDER BY {{ column }} ASC NULLS LAST) FILTER (WHERE kind = {{ kind | lit }}), CAST([] AS VARCHAR[])) AS {{ kind }}_{{ column }},
        {% endfor %}
        list(field || ': ' || value_norm || ' (' || kind || ')' ORDER BY field ASC NULLS LAST, value_norm ASC NULLS LAST) AS tender_constraints
    FROM field_constraints
    GROUP BY query_id
),
-- the query's own constraints, guarded by §3.3, and its tender's, enforced alike
fielded_queries AS (
    SELECT
        g.* REPLACE (
            list_sort(list_distinct(g.entity_constraints || coalesce(f.entity_value_canon, CAST([] AS VARCHAR[])))) AS entity_constraints,
            list_sort(list_distinct(g.must_include_terms || coalesce(f.must_include_value_norm, CAST([] AS VARCHAR[])))) AS must_include_terms,
            list_sort(list_distinct(g.must_exclude_terms || coalesce(f.must_exclude_value_norm, CAST([] AS VARCHAR[])))) AS must_exclude_terms,
            g.include_canon || coalesce(f.must_include_value_canon, CAST([] AS VARCHAR[])) AS include_canon,
            g.exclude_canon || coalesce(f.must_exclude_value_canon, CAST([] AS VARCHAR[])) AS exclude_canon
        ),
        coalesce(f.tender_constraints, CAST([] AS VARCHAR[])) AS tender_constraints
    FROM {{ 'compressed_queries' if cz else 'guarded_queries' }} AS g
    LEFT JOIN field_constraint_sets AS f ON f.query_id = g.query_id
),
{% endif %}
-- chunk texts normalised and rewritten like the queries, for the §3.2 filters
chunk_terms AS (
    SELECT
        c.tenant_id,
        c.chunk_id,
        {{ with_synonyms(text_of(tokens(folded('c.text'))), 's.synonym_pattern', 's.synonym_map') }} AS chunk_canon
    FROM chunks AS c
    LEFT JOIN synonym_sets AS s ON s.tenant_id = c.tenant_id AND s.project_id = c.project_id
),
{% endif %}
-- §3.2/§3.3 constraint check, §3.1.4 query typing, §4 retrieval mode
typed_queries AS (
    SELECT
        query_id, tenant_id, project_id, evaluation_id, supplier_id, criteria_id, query_text,
        query_norm, rewritten_query, numeric_constraints, time_constraints,
        numeric_constraints = rewritten_numbers AND time_constraints = rewritten_times AS constraints_preserved,
        {{ lost_constraints() }} AS constraint_diff,
        {% if cx %}
        rewrite_reason, entity_constraints, must_include_terms, must_exclude_terms,
        {% endif %}
        {% if fields %}
        tender_constraints,
        {% endif %}
        {% if cz %}
        uncompressed_query, uncompressed_length, rewritten_length, compression_reason,
        {% endif %}
        CASE
            {% for entry in type_patterns %}
            WHEN regexp_matches(rewritten_query, {{ entry.pattern | lit }}) THEN {{ entry.type | lit }}
            {% endfor %}
        END AS detected_type,
        coalesce(query_type, detected_type) AS query_type,
        coalesce(high_risk, 0) AS high_risk,
        CASE
            WHEN coalesce(high_risk, 0) = 1 THEN {{ p.high_risk_mode | lit }}
            {% for type, mode in p.modes.items() %}
            WHEN coalesce(query_type, detected_type) = {{ type | lit }} THEN {{ mode | lit }}
            {% endfor %}
            ELSE {{ p.fallback_mode | lit }}
        END AS mode,
        TRUE AS tenant_filter,
        {% for name in ('top_k', 'chunk_top_k', 'include_references', 'enable_rerank', 'max_entity_tokens', 'max_relation_tokens') %}
        {{ p.retrieval[name] | lit }} AS {{ name }},
        {% endfor %}
        doc_scope,
        sql_condition,
        retrieval_ms
    FROM {{ query_stage }}
),
-- §5.1 LightRAG hits, capped at chunk_top_k by rank
lightrag_branch AS (
    SELECT h.query_id, h.chunk_id, h.score_raw, h.rank, 'lightrag' AS branch
    FROM hits AS h
    WHERE h.rank <= {{ p.retrieval.chunk_top_k | lit }}
),
-- §5.3 the SQL whitelist branch: each distinct condition, compiled, its values bound; the
-- query's tenant, project and supplier are join keys, outside anything the user wrote
sql_branch AS (
    {% for branch in sql_branches %}
    SELECT q.query_id, b.chunk_id, {{ p.retrieval.sql_branch_score | lit }} AS score_raw,
           CAST(NULL AS BIGINT) AS rank, 'sql' AS branch
    FROM queries AS q
    JOIN bid_fields AS b
      ON b.tenant_id = q.tenant_id AND b.project_id = q.project_id AND b.supplier_id = q.supplier_id
    WHERE q.sql_condition = ${{ branch.text_parameter }} AND {{ branch.condition | fragment }}
    UNION ALL
    {% endfor %}
    SELECT CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS DOUBLE), CAST(NULL AS BIGINT),
           CAST(NULL AS VARCHAR)
    WHERE FALSE
),
-- §5.1 merge and de-duplicate
merged AS (
    SELECT
        query_id,
        chunk_id,
        max(score_raw) AS score_raw,
        min(rank) AS rank,
        list_sort(list(DISTINCT branch)) AS sources
    FROM (SELECT * FROM lightrag_branch UNION ALL SELECT * FROM sql_branch)
    GROUP BY query_id, chunk_id
),
-- §5.2 filters in order; the first one failed is the reason a candidate went no further
screened AS (
    SELECT
        m.query_id, m.chunk_id, m.score_raw, m.rank, m.sources,
        q.tenant_id, q.project_id, q.evaluation_id, q.supplier_id, q.criteria_id,
        c.doc_id, c.doc_type, c.page, c.tokens, coalesce(c.confidence, {{ 1.0 | lit }}) AS chunk_confidence,
        c.supplier_id AS chunk_supplier_id,
        CASE
            WHEN c.chunk_id IS NULL THEN 'tenant_id'
            WHEN c.project_id <> q.project_id THEN 'project_id'
            WHEN q.doc_scope IS NOT NULL AND NOT {{ in_list('c.doc_type', 'q.doc_scope') }} THEN 'doc_scope'
            WHEN c.supplier_id IS NOT NULL AND c.supplier_id <> q.supplier_id THEN 'supplier_scope'
            WHEN c.rule_scope IS NOT NULL AND NOT {{ in_list('q.criteria_id', 'c.rule_scope') }} THEN 'rule_scope'
            {% if cx %}
            WHEN len(list_filter(g.entity_constraints, lambda entity: NOT contains(t.chunk_canon, entity))) > 0 THEN 'entity_constraints'
            WHEN len(list_filter(g.include_canon, lambda term: NOT contains(t.chunk_canon, term))) > 0 THEN 'must_include_terms'
            WHEN len(list_filter(g.exclude_canon, lambda term: contains(t.chunk_canon, term))) > 0 THEN 'must_exclude_terms'
            {% endif %}
        END AS dropped_by
    FROM merged AS m
    JOIN queries AS q ON q.query_id = m.query_id
    LEFT JOIN chunks AS c ON c.tenant_id = q.tenant_id AND c.chunk_id = m.chunk_id
    {% if cx %}
    JOIN {{ query_stage }} AS g ON g.query_id = m.query_id
    LEFT JOIN chunk_terms AS t ON t.tenant_id = q.tenant_id AND t.chunk_id = m.chunk_id
    {% endif %}
),
filter_log AS (
    SELECT query_id, chunk_id, 'chunk_top_k' AS dropped_by
    FROM hits
    WHERE rank > {{ p.retrieval.chunk_top_k | lit }}
    UNION ALL
    SELECT query_id, chunk_id, dropped_by
    FROM screened
    WHERE dropped_by IS NOT NULL
),
-- §6.1 rerank records, §6.4 degradation to the retrieval score
candidates AS (
    SELECT
        s.query_id, s.chunk_id, s.tenant_id, s.project_id, s.evaluation_id, s.supplier_id,
        s.criteria_id, s.doc_id, s.doc_type, s.page, s.tokens, s.chunk_confidence, s.sources,
        s.rank, s.score_raw,
        CASE
            WHEN r.status IS NULL THEN 'missing'
            WHEN r.status = 'ok' AND r.score_rerank IS NOT NULL THEN NULL
            WHEN r.status = 'timeout' THEN 'timeout'
            ELSE 'error'
        END AS degraded_cause,
        degraded_cause IS NOT NULL AS degraded,
        CASE WHEN degraded_cause IS NULL THEN r.score_rerank ELSE s.score_raw END AS score_rerank,
        CASE WHEN degraded_cause IS NULL THEN r.reason
             ELSE 'rerank ' || degraded_cause || ': retrieval score kept' END AS reason,
        CASE WHEN degraded_cause IS NULL THEN r.score_rerank ELSE s.score_raw END AS relevance,
        to_json({'doc_id': s.doc_id, 'doc_type': s.doc_type, 'page': s.page,
                 'supplier_id': s.chunk_supplier_id, 'sources': s.sources}) AS metadata
    FROM screened AS s
    LEFT JOIN rerank AS r ON r.query_id = s.query_id AND r.chunk_id = s.chunk_id
    WHERE s.dropped_by IS NULL
),
degradation_events AS (
    SELECT query_id, chunk_id, evaluation_id, supplier_id, criteria_id, degraded_cause AS cause
    FROM candidates
    WHERE degraded
),
-- §6.2/§6.3 evidence packing: keep order = reverse trim order (low relevance, then redundant sources)
evidence_ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY query_id, doc_id ORDER BY relevance DESC NULLS LAST, chunk_id ASC NULLS LAST
        ) AS doc_rank
    FROM candidates
),
evidence_classed AS (
    SELECT
        *,
        CASE WHEN relevance < {{ pk.low_relevance | lit }} THEN 2 WHEN doc_rank > 1 THEN 1 ELSE 0 END AS trim_class,
        tokens > {{ pk.criterion_tokens | lit }} AS oversize,
        relevance * chunk_confidence AS priority
    FROM evidence_ranked
),
evidence_ordered AS (
    SELECT
        *,
        -- a chunk larger than the whole criterion budget can never be packed: it goes last,
        -- so it does not block the chunks after it
        row_number() OVER (
            PARTITION BY query_id
            ORDER BY oversize ASC NULLS LAST, trim_class ASC NULLS LAST,
                     priority DESC NULLS LAST, chunk_id ASC NULLS LAST
        ) AS keep_order
    FROM evidence_classed
),
evidence_criterion AS (
    SELECT
        *,
        keep_order <= {{ pk.max_items | lit }}
            AND sum(tokens) OVER (
                PARTITION BY query_id
                ORDER BY keep_order ASC NULLS LAST, chunk_id ASC NULLS LAST
                ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
            ) <= {{ pk.criterion_tokens | lit }} AS in_criterion_pack
    FROM evidence_ordered
),
evidence_report AS (
    SELECT
        query_id,
        chunk_id,
        row_number() OVER (
            PARTITION BY evaluation_id, supplier_id
            ORDER BY keep_order > {{ pk.min_items | lit }} ASC NULLS LAST, trim_class ASC NULLS LAST,
                     priority DESC NULLS LAST, query_id ASC NULLS LAST, chunk_id ASC NULLS LAST
        ) AS report_order,
        tokens
    FROM evidence_criterion
    WHERE in_criterion_pack
),
evidence AS (
    SELECT
        e.query_id, e.chunk_id, e.tenant_id, e.project_id, e.evaluation_id, e.supplier_id,
        e.criteria_id, e.doc_id, e.doc_type, e.page, e.tokens, e.relevance, e.chunk_confidence,
        e.doc_rank, e.trim_class, e.oversize, e.priority, e.keep_order, e.in_criterion_pack, r.report_order,
        coalesce(sum(r.tokens) OVER (
            PARTITION BY e.evaluation_id, e.supplier_id
            ORDER BY r.report_order ASC NULLS LAST, e.query_id ASC NULLS LAST, e.chunk_id ASC NULLS LAST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) <= {{ pk.report_tokens | lit }} AND r.report_order IS NOT NULL, FALSE) AS packed
    FROM evidence_criterion AS e
    LEFT JOIN evidence_report AS r ON r.query_id = e.query_id AND r.chunk_id = e.chunk_id
),
-- §7.1 rule engine: every supplier of an evaluation or of bid_fields, its fields (NULL if none)
bidders AS (
    SELECT k.tenant_id, k.project_id, k.supplier_id,
           b.chunk_id IS NOT NULL AS has_bid_fields,
           b.supplier_code, b.qualification_level, b.registered_capital, b.bid_price,
           b.delivery_period, b.warranty_period,
           coalesce(d.doc_types, CAST([] AS VARCHAR[])) AS doc_types
    FROM (
        SELECT DISTINCT tenant_id, project_id, supplier_id FROM evaluations
        UNION
        SELECT DISTINCT tenant_id, project_id, supplier_id FROM bid_fields
    ) AS k
    LEFT JOIN bid_fields AS b
      ON b.tenant_id = k.tenant_id AND b.project_id = k.project_id AND b.supplier_id = k.supplier_id
    LEFT JOIN (
        SELECT tenant_id, project_id, supplier_id, list_sort(list(DISTINCT doc_type)) AS doc_types
        FROM chunks
        WHERE supplier_id IS NOT NULL
        GROUP BY tenant_id, project_id, supplier_id
    ) AS d
      ON d.tenant_id = k.tenant_id AND d.project_id = k.project_id AND d.supplier_id = k.supplier_id
),
gate_rules AS (
    {% for rule in rules if rule.kind != 'formula' %}
    SELECT
        b.tenant_id, b.project_id, b.supplier_id, {{ rule.id | lit }} AS rule_id,
        c.criteria_id, {{ rule.kind | lit }} AS kind, CAST(NULL AS DOUBLE) AS value,
        {% if rule.kind == 'redline' %}
        coalesce({{ rule.expression | fragment }}, FALSE) AS passed,
        ({{ rule.expression | fragment }}) IS NULL AS missing_material,
        CAST([] AS VARCHAR[]) AS missing,
        {% else %}
        len(list_filter({{ rule.documents | lit }}, lambda doc: NOT list_contains(b.doc_types, doc))) = 0 AS passed,
        len(list_filter({{ rule.documents | lit }}, lambda doc: NOT list_contains(b.doc_types, doc))) > 0 AS missing_material,
        list_filter({{ rule.documents | lit }}, lambda doc: NOT list_contains(b.doc_types, doc)) AS missing,
        {% endif %}
        {{ rule.reason | lit }} AS rule_reason
    FROM bidders AS b
    JOIN criteria AS c
      ON c.tenant_id = b.tenant_id AND c.project_id = b.project_id AND c.criteria_id = {{ rule.criteria_id | lit }}
    UNION ALL
    {% endfor %}
    {{ no_rule_rows() }}
),
-- the qualified suppliers of a project pass every redline and required rule (and have bid fields)
qualified_aggregates AS (
    SELECT
        b.tenant_id,
        b.project_id,
        {% for fn, field in aggregate_columns %}
        {{ fn }}(b.{{ field }}) AS {{ fn }}__{{ field }}{{ ',' if not loop.last }}
        {% endfor %}
    FROM bidders AS b
    WHERE b.has_bid_fields
      AND NOT EXISTS (
          SELECT 1 FROM gate_rules AS g
          WHERE g.tenant_id = b.tenant_id AND g.project_id = b.project_id
            AND g.supplier_id = b.supplier_id AND NOT g.passed
      )
    GROUP BY b.tenant_id, b.project_id
),
formula_rules AS (
    {% for rule in rules if rule.kind == 'formula' %}
    SELECT
        b.tenant_id, b.project_id, b.supplier_id, {{ rule.id | lit }} AS rule_id,
        c.criteria_id, 'formula' AS kind,
        CAST({{ rule.expression | fragment }} AS DOUBLE) AS value,
        CAST(NULL AS BOOLEAN) AS passed,
        value IS NULL OR NOT isfinite(value) AS missing_material,
        CAST([] AS VARCHAR[]) AS missing,
        {{ rule.reason | lit }} AS rule_reason
    FROM (
        SELECT b.*, {% for fn, field in aggregate_columns %}a.{{ fn }}__{{ field }}{{ ', ' if not loop.last }}{% endfor %}

        FROM bidders AS b
        LEFT JOIN qualified_aggregates AS a ON a.tenant_id = b.tenant_id AND a.project_id = b.project_id
    ) AS b
    JOIN criteria AS c
      ON c.tenant_id = b.tenant_id AND c.project_id = b.project_id AND c.criteria_id = {{ rule.criteria_id | lit }}
    UNION ALL
    {% endfor %}
    {{ no_rule_rows() }}
),
rule_results AS (
    SELECT
        tenant_id, project_id, supplier_id, rule_id, criteria_id, kind, value, passed,
        missing_material, missing,
        CASE
            WHEN kind = 'required' AND missing_material
                THEN rule_reason || ' — missing: ' || array_to_string(missing, ', ')
            WHEN missing_material THEN rule_reason || ' — missing material'
            WHEN kind = 'formula' THEN rule_reason
            WHEN passed THEN rule_reason || ' — pass'
            ELSE rule_reason || ' — fail'
        END AS reason
    FROM (SELECT * FROM gate_rules UNION ALL SELECT * FROM formula_rules)
),
-- §8.1 one row per evaluation, supplier and criterion of its project
criteria_grid AS (
    SELECT
        e.evaluation_id, e.supplier_id, e.tenant_id, e.project_id,
        c.criteria_id, c.name, c.weight, c.max_score, c.method,
        q.query_id
    FROM evaluations AS e
    JOIN criteria AS c ON c.tenant_id = e.tenant_id AND c.project_id = e.project_id
    LEFT JOIN queries AS q
      ON q.evaluation_id = e.evaluation_id AND q.supplier_id = e.supplier_id AND q.criteria_id = c.criteria_id
),
soft_runs AS (
    SELECT
        evaluation_id, supplier_id, criteria_id,
        count(*) AS runs,
        list_avg(list(score ORDER BY run_id ASC NULLS LAST)) AS mean_score,
        min(score) AS min_score,
        max(score) AS max_score_seen,
        list(reason ORDER BY run_id ASC NULLS LAST)[1] AS first_reason,
        list(redline_pass ORDER BY run_id ASC NULLS LAST) AS redline_votes
    FROM soft_scores
    GROUP BY evaluation_id, supplier_id, criteria_id
),
packed_evidence AS (
    SELECT
        query_id,
        count(*) AS evidence_count,
        list_avg(list(relevance ORDER BY report_order ASC NULLS LAST)) AS mean_relevance,
        list({'chunk_id': chunk_id, 'page': page} ORDER BY report_order ASC NULLS LAST) AS citations
    FROM evidence
    WHERE packed
    GROUP BY query_id
),
agreement_ranks AS (
    SELECT
        query_id,
        row_number() OVER (PARTITION BY query_id ORDER BY score_raw DESC NULLS LAST, chunk_id ASC NULLS LAST) AS raw_rank,
        row_number() OVER (PARTITION BY query_id ORDER BY score_rerank DESC NULLS LAST, chunk_id ASC NULLS LAST) AS rerank_rank,
        count(*) OVER (PARTITION BY query_id) AS reranked
    FROM candidates
    WHERE NOT degraded
),
agreement AS (
    SELECT
        query_id,
        count(*) FILTER (
            WHERE raw_rank <= least(reranked, {{ pk.max_items | lit }})
              AND rerank_rank <= least(reranked, {{ pk.max_items | lit }})
        ) / NULLIF(least(max(reranked), {{ pk.max_items | lit }}), 0) AS retrieval_agreement
    FROM agreement_ranks
    GROUP BY query_id
),
criteria_scored AS (
    SELECT
        g.*,
        coalesce(s.runs, 0) AS runs,
        r.rule_id, r.value AS rule_value, r.passed AS rule_passed, r.missing_material, r.missing,
        CASE g.method
            WHEN 'llm' THEN coalesce(s.mean_score, {{ 0.0 | lit }})
            WHEN 'formula' THEN CASE WHEN r.missing_material THEN {{ 0.0 | lit }} ELSE greatest({{ 0.0 | lit }}, least(g.max_score, r.value)) END
            ELSE CASE WHEN r.passed THEN g.max_score ELSE {{ 0.0 | lit }} END
        END AS score,
        CASE g.method
            WHEN 'llm' THEN TRUE
            WHEN 'formula' THEN NOT r.missing_material
            ELSE r.passed
        END AS hard_pass,
        g.method IN ('redline', 'required')
            AND coalesce(len(list_filter(s.redline_votes, lambda vote: vote IS NOT NULL AND (vote = 1) <> r.passed)), 0) > 0
            AS redline_conflict,
        CASE WHEN g.method = 'llm' THEN s.first_reason ELSE r.reason END AS reason,
        coalesce(pe.evidence_count, 0) AS evidence_count,
        coalesce(pe.evidence_count, 0) < {{ pk.min_items | lit }} AS evidence_short,
        coalesce(pe.citations, []) AS citations,
        coalesce(pe.mean_relevance * least({{ 1.0 | lit }}, pe.evidence_count / {{ pk.min_items | lit }}), {{ 0.0 | lit }}) AS evidence_quality,
        coalesce(a.retrieval_agreement, {{ p.confidence.agreement_when_unavailable | lit }}) AS retrieval_agreement,
        CASE
            WHEN g.method <> 'llm' THEN {{ 1.0 | lit }}
            WHEN coalesce(s.runs, 0) = 0 THEN {{ 0.0 | lit }}
            WHEN s.runs = 1 THEN {{ p.confidence.single_run_stability | lit }}
            ELSE {{ 1.0 | lit }} - (s.max_score_seen - s.min_score) / NULLIF(g.max_score, 0)
        END AS model_stability
    FROM criteria_grid AS g
    LEFT JOIN soft_runs AS s
      ON s.evaluation_id = g.evaluation_id AND s.supplier_id = g.supplier_id AND s.criteria_id = g.criteria_id
    LEFT JOIN rule_results AS r
      ON r.tenant_id = g.tenant_id AND r.project_id = g.project_id AND r.supplier_id = g.supplier_id
     AND r.criteria_id = g.criteria_id
    LEFT JOIN packed_evidence AS pe ON pe.query_id = g.query_id
    LEFT JOIN agreement AS a ON a.query_id = g.query_id
),
criteria_results AS (
    SELECT
        *,
        {{ cw.evidence_quality | lit }} * evidence_quality
            + {{ cw.retrieval_agreement | lit }} * retrieval_agreement
            + {{ cw.model_stability | lit }} * model_stability AS confidence
    FROM criteria_scored
),
-- §8.4 consistency over repeated runs
run_totals AS (
    SELECT
        g.evaluation_id, g.supplier_id, r.run_id,
        list_sum(list(g.weight * CASE WHEN g.method = 'llm' THEN coalesce(s.score, g.score) ELSE g.score END
                      ORDER BY g.criteria_id ASC NULLS LAST)) AS run_total
    FROM criteria_results AS g
    JOIN (SELECT DISTINCT evaluation_id, supplier_id, run_id FROM soft_scores) AS r
      ON r.evaluation_id = g.evaluation_id AND r.supplier_id = g.supplier_id
    LEFT JOIN soft_scores AS s
      ON s.evaluation_id = g.evaluation_id AND s.supplier_id = g.supplier_id
     AND s.criteria_id = g.criteria_id AND s.run_id = r.run_id
    GROUP BY g.evaluation_id, g.supplier_id, r.run_id
),
consistency AS (
    SELECT
        evaluation_id, supplier_id,
        count(*) AS runs,
        CASE
            WHEN count(*) < 2 OR max(run_total) = min(run_total) THEN {{ 0.0 | lit }}
            ELSE {{ 100.0 | lit }} * (max(run_total) - min(run_total)) / NULLIF(list_avg(list(run_total ORDER BY run_id ASC NULLS LAST)), 0)
        END AS score_deviation_pct
    FROM run_totals
    GROUP BY evaluation_id, supplier_id
),
-- §10 claims and their citations, resolved within the evaluation's tenant and project
claim_citation_checks AS (
    SELECT
        cl.claim_id, cl.evaluation_id, cl.supplier_id, cl.criteria_id,
        cc.chunk_id, cc.page,
        cc.chunk_id IS NOT NULL
            AND ch.chunk_id IS NOT NULL
            AND (ch.supplier_id IS NULL OR ch.supplier_id = cl.supplier_id)
            AND cc.page IS NOT NULL AND cc.page = ch.page
            AND cc.bbox_x0 IS NOT NULL AND cc.bbox_y0 IS NOT NULL AND cc.bbox_x1 IS NOT NULL AND cc.bbox_y1 IS NOT NULL
            AND cc.bbox_x0 < cc.bbox_x1 AND cc.bbox_y0 < cc.bbox_y1
            AND cc.bbox_x0 >= ch.bbox_x0 AND cc.bbox_y0 >= ch.bbox_y0
            AND cc.bbox_x1 <= ch.bbox_x1 AND cc.bbox_y1 <= ch.bbox_y1 AS resolvable
    FROM claims AS cl
    JOIN evaluations AS e ON e.evaluation_id = cl.evaluation_id AND e.supplier_id = cl.supplier_id
    LEFT JOIN claim_citations AS cc ON cc.claim_id = cl.claim_id
    LEFT JOIN chunks AS ch
      ON ch.tenant_id = e.tenant_id AND ch.chunk_id = cc.chunk_id AND ch.project_id = e.project_id
),
claim_results AS (
    SELECT
        claim_id, evaluation_id, supplier_id, criteria_id,
        count(chunk_id) AS citations,
        count(*) FILTER (WHERE resolvable) AS resolvable,
        count(chunk_id) = 1 AS one_to_one,
        CASE WHEN count(*) FILTER (WHERE resolvable) >= 1 THEN 'supported' ELSE 'unsupported_claim' END AS status
    FROM claim_citation_checks
    GROUP BY claim_id, evaluation_id, supplier_id, criteria_id
),
claim_summary AS (
    SELECT
        evaluation_id, supplier_id,
        count(*) AS claims,
        count(*) FILTER (WHERE status = 'unsupported_claim') AS unsupported_claims,
        count(*) FILTER (WHERE status = 'supported') / NULLIF(count(*), 0) AS citation_coverage{{ ',' if citation_mapping_reviewed }}
        {% if citation_mapping_reviewed %}
        count(*) FILTER (WHERE NOT one_to_one) AS claims_not_one_to_one
        {% endif %}
    FROM claim_results
    GROUP BY evaluation_id, supplier_id
),
degradation_summary AS (
    SELECT
        evaluation_id, supplier_id,
        count(*) AS candidates,
        count(*) FILTER (WHERE degraded) AS degraded_candidates
    FROM candidates
    GROUP BY evaluation_id, supplier_id
),
-- §8.2 totals, §8.3 confidence, §9 triggers, §10.3 blocking, risk level
evaluation_totals AS (
    SELECT
        evaluation_id, supplier_id,
        list_sum(list(score * weight ORDER BY criteria_id ASC NULLS LAST)) AS total_score,
        coalesce(bool_or(method IN ('redline', 'required') AND NOT hard_pass), FALSE) AS vetoed,
        coalesce(bool_or(redline_conflict), FALSE) AS redline_conflict,
        CASE
            WHEN sum(weight) > 0
                THEN list_sum(list(weight * confidence ORDER BY criteria_id ASC NULLS LAST))
                     / NULLIF(list_sum(list(weight ORDER BY criteria_id ASC NULLS LAST)), 0)
            ELSE list_avg(list(confidence ORDER BY criteria_id ASC NULLS LAST))
        END AS confidence,
        count(*) AS criteria{{ ',' if short_evidence_reviewed }}
        {% if short_evidence_reviewed %}
        count(*) FILTER (WHERE evidence_short) AS evidence_short_criteria
        {% endif %}
    FROM criteria_results
    GROUP BY evaluation_id, supplier_id
),
evaluation_flags AS (
    SELECT
        e.evaluation_id, e.supplier_id, e.tenant_id, e.project_id, e.trace_id,
        coalesce(e.force_review, 0) = 1 AS forced_review,
        e.scoring_ms,
        coalesce(t.total_score, {{ 0.0 | lit }}) AS total_score,
        coalesce(t.vetoed, FALSE) AS vetoed,
        coalesce(t.redline_conflict, FALSE) AS redline_conflict,
        coalesce(t.confidence, {{ 0.0 | lit }}) AS confidence,
        coalesce(t.criteria, 0) AS criteria,
        coalesce(cs.runs, 0) AS runs,
        coalesce(cs.score_deviation_pct, {{ 0.0 | lit }}) AS score_deviation_pct,
        coalesce(cs.score_deviation_pct, {{ 0.0 | lit }}) > {{ p.hitl.max_score_deviation_pct | lit }} AS calibration_needed,
        coalesce(cl.claims, 0) AS claims,
        coalesce(cl.unsupported_claims, 0) AS unsupported_claims,
        coalesce(cl.citation_coverage, {{ 1.0 | lit }}) AS citation_coverage,
        coalesce(d.candidates, 0) AS candidates,
        coalesce(d.degraded_candidates, 0) AS degraded_candidates,
        coalesce(d.degraded_candidates / NULLIF(d.candidates, 0), {{ 0.0 | lit }}) AS rerank_degraded_ratio,
        coalesce(d.degraded_candidates / NULLIF(d.candidates, 0), {{ 0.0 | lit }}) > {{ p.rerank.alert_ratio | lit }} AS rerank_alert{{ ',' if short_evidence_reviewed or citation_mapping_reviewed }}
        {% if short_evidence_reviewed %}
        coalesce(t.evidence_short_criteria, 0) AS evidence_short_criteria{{ ',' if citation_mapping_reviewed }}
        {% endif %}
        {% if citation_mapping_reviewed %}
        coalesce(cl.claims_not_one_to_one, 0) AS claims_not_one_to_one
        {% endif %}
    FROM evaluations AS e
    LEFT JOIN evaluation_totals AS t ON t.evaluation_id = e.evaluation_id AND t.supplier_id = e.supplier_id
    LEFT JOIN consistency AS cs ON cs.evaluation_id = e.evaluation_id AND cs.supplier_id = e.supplier_id
    LEFT JOIN claim_summary AS cl ON cl.evaluation_id = e.evaluation_id AND cl.supplier_id = e.supplier_id
    LEFT JOIN degradation_summary AS d ON d.evaluation_id = e.evaluation_id AND d.supplier_id = e.supplier_id
),
evaluation_decisions AS (
    SELECT
        *,
        list_filter([
            CASE WHEN confidence < {{ p.hitl.min_confidence | lit }} THEN 'low_confidence' END,
            CASE WHEN citation_coverage < {{ p.hitl.min_citation_coverage | lit }} THEN 'low_citation_coverage' END,
            CASE WHEN score_deviation_pct > {{ p.hitl.max_score_deviation_pct | lit }} THEN 'score_deviation' END,
            CASE WHEN redline_conflict THEN 'redline_conflict' END,
            CASE WHEN forced_review THEN 'forced_review' END{{ ',' if short_evidence_reviewed or citation_mapping_reviewed }}
            {% if short_evidence_reviewed %}
            CASE WHEN evidence_short_criteria > 0 THEN 'insufficient_evidence' END{{ ',' if citation_mapping_reviewed }}
            {% endif %}
            {% if citation_mapping_reviewed %}
            CASE WHEN claims_not_one_to_one > 0 THEN 'citation_mapping' END
            {% endif %}
        ], lambda reason: reason IS NOT NULL) AS hitl_reasons,
        len(hitl_reasons) > 0 AS needs_human_review,
        CASE WHEN unsupported_claims > 0 THEN NULL
             WHEN vetoed THEN 'disqualified' ELSE 'qualified' END AS recommendation,
        CASE WHEN unsupported_claims > 0 THEN 'blocked'
             WHEN needs_human_review THEN 'human_review' ELSE 'final' END AS recommendation_status,
        CASE WHEN vetoed OR unsupported_claims > 0 OR redline_conflict THEN 'high'
             WHEN needs_human_review OR rerank_alert THEN 'medium' ELSE 'low' END AS risk_level
    FROM evaluation_flags
),
evaluation_results AS (
    SELECT
        *,
        CASE WHEN NOT vetoed THEN row_number() OVER (
            PARTITION BY tenant_id, project_id, evaluation_id, vetoed
            ORDER BY total_score DESC NULLS LAST, supplier_id ASC NULLS LAST
        ) END AS rank,
        {{ policy_version | lit }} AS policy_version
    FROM evaluation_decisions
)
{% endmacro %}
