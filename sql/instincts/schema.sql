{#-
Seed 004's store: the four tables with the seed's names and columns, in DuckDB. Rendered with
the policy (defaults and the composite's weights) by `duckscore instincts init`; every statement
is idempotent (IF NOT EXISTS). Differences from the seed's PostgreSQL, forced by DuckDB:
- `composite` is a VIRTUAL generated column (DuckDB has no STORED ones): same expression, same
  DECIMAL(4,3), computed on read;
- no FOREIGN KEYs: DuckDB cannot delete a parent row in the transaction that deletes its
  children, so the seed's ON DELETE CASCADE is done by the runner, in the decay transaction, and
  references to users/projects (tables the seed does not define) are plain UUID columns;
- JSONB is JSON; the partial index on active status and the index on the generated composite
  are plain or absent (DuckDB indexes neither predicates nor generated columns).
-#}
{% set w = policy.weights %}
{% set start = policy.initial %}
CREATE TABLE IF NOT EXISTS instincts (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    trigger_text TEXT NOT NULL,
    action_text TEXT NOT NULL,
    domain VARCHAR(50) NOT NULL,
    freq_score DECIMAL(4, 3) NOT NULL DEFAULT {{ start.frequency | lit }},
    eff_score DECIMAL(4, 3) NOT NULL DEFAULT {{ start.effectiveness | lit }},
    human_score DECIMAL(4, 3) NOT NULL DEFAULT {{ start.human | lit }},
    composite DECIMAL(4, 3) GENERATED ALWAYS AS (
        CAST(freq_score * {{ w.frequency | lit }} + eff_score * {{ w.effectiveness | lit }}
             + human_score * {{ w.human | lit }} AS DECIMAL(4, 3))
    ) VIRTUAL,
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
CREATE INDEX IF NOT EXISTS idx_instincts_status ON instincts (status);
CREATE TABLE IF NOT EXISTS instinct_applications (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    instinct_id UUID,
    session_id UUID NOT NULL,
    outcome VARCHAR(20) NOT NULL CHECK (outcome IN ('positive', 'negative', 'neutral')),
    signals JSON NOT NULL DEFAULT '{}',
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS instinct_evidence (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    instinct_id UUID,
    event_type VARCHAR(50) NOT NULL,
    description TEXT NOT NULL,
    session_id UUID,
    observed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS confidence_history (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    instinct_id UUID,
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
);
