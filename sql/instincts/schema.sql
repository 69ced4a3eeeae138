{#-
Seed 004's store: the four tables with the seed's names and columns, and duckscore's bookkeeping
tables. Rendered with the policy (defaults and the composite's weights) by `duckscore instincts
init`: for a DuckDB file (every statement idempotent: IF NOT EXISTS), or, with `postgres` true,
as migration 1 of a PostgreSQL store (instincts/postgres.py), which keeps the seed's schema as
written: the STORED composite, REFERENCES … ON DELETE CASCADE, JSONB, the partial index on active
status and the index on the composite.

What DuckDB changes in the seed's schema, forced by DuckDB:
- `composite` is a VIRTUAL generated column (DuckDB has no STORED ones);
- no FOREIGN KEYs: DuckDB cannot delete a parent row in the transaction that deletes its
  children, so the seed's ON DELETE CASCADE is done by the runner, in the decay transaction;
- JSONB is JSON; the partial index on active status is a plain one (DuckDB indexes no
  predicate); the index on the generated composite is DuckDB's ART index, which has no order
  (DuckDB accepts and drops DESC).
On both: `composite` is the seed's exact decimal sum (_stored_composite.sql), and `user_id` and
`project_id` reference no table — the seed references `users` and `projects` without defining
them. Numbers reach the SQL through `lit` (CAST(… AS DOUBLE)), the type renamed for PostgreSQL.
-#}
{% from 'instincts/_stored_composite.sql' import stored_composite %}
{% set pg = postgres | default(false) %}
{% set double = 'DOUBLE PRECISION' if pg else 'DOUBLE' %}
{% macro number(x) -%}
{{ x | lit | replace(' AS DOUBLE)', ' AS ' ~ double ~ ')') }}
{%- endmacro %}
{% set parent = ' REFERENCES instincts (id) ON DELETE CASCADE' if pg else '' %}
{% set w = policy.weights %}
{% set start = policy.initial %}
CREATE TABLE IF NOT EXISTS instincts (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    trigger_text TEXT NOT NULL,
    action_text TEXT NOT NULL,
    domain VARCHAR(50) NOT NULL,
    freq_score DECIMAL(4, 3) NOT NULL DEFAULT {{ number(start.frequency) }},
    eff_score DECIMAL(4, 3) NOT NULL DEFAULT {{ number(start.effectiveness) }},
    human_score DECIMAL(4, 3) NOT NULL DEFAULT {{ number(start.human) }},
    composite DECIMAL(4, 3) GENERATED ALWAYS AS (
        {{ stored_composite(w, double) }}
    ) {{ 'STORED' if pg else 'VIRTUAL' }},
    observation_count INTEGER NOT NULL DEFAULT 1,
    application_count INTEGER NOT NULL DEFAULT 0,
    success_count INTEGER NOT NULL DEFAULT 0,
    contradiction_count INTEGER NOT NULL DEFAULT 0,
    first_seen TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_applied TIMESTAMPTZ,
    last_verified TIMESTAMPTZ,
    source VARCHAR(50) NOT NULL DEFAULT 'observation',
    project_id UUID,
    user_id UUID NOT NULL,
    status VARCHAR(20) NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'deprecated', 'evolved', 'archived')),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS idx_instincts_user_domain ON instincts (user_id, domain);
CREATE INDEX IF NOT EXISTS idx_instincts_composite ON instincts (composite DESC);
{% if pg %}
CREATE INDEX IF NOT EXISTS idx_instincts_status ON instincts (status) WHERE status = 'active';
{% else %}
CREATE INDEX IF NOT EXISTS idx_instincts_status ON instincts (status);
{% endif %}
CREATE TABLE IF NOT EXISTS instinct_applications (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    instinct_id UUID{{ parent }},
    session_id UUID NOT NULL,
    outcome VARCHAR(20) NOT NULL CHECK (outcome IN ('positive', 'negative', 'neutral')),
    signals {{ 'JSONB' if pg else 'JSON' }} NOT NULL DEFAULT '{}',
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS instinct_evidence (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    instinct_id UUID{{ parent }},
    event_type VARCHAR(50) NOT NULL,
    description TEXT NOT NULL,
    session_id UUID,
    observed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS confidence_history (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    instinct_id UUID{{ parent }},
    freq_score DECIMAL(4, 3) NOT NULL,
    eff_score DECIMAL(4, 3) NOT NULL,
    human_score DECIMAL(4, 3) NOT NULL,
    composite DECIMAL(4, 3) NOT NULL,
    reason VARCHAR(100),
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- duckscore's own bookkeeping: schema version and policy, ingested event ids, decay weeks
CREATE TABLE IF NOT EXISTS duckscore_store (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS ingested_events (event_id VARCHAR PRIMARY KEY, ingested_at TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS decay_runs (
    week_start DATE PRIMARY KEY,
    ran_at TIMESTAMPTZ NOT NULL,
    decayed INTEGER NOT NULL,
    deprecated INTEGER NOT NULL,
    deleted INTEGER NOT NULL
)
