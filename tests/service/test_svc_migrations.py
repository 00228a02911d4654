"""Migrations that add a table: each matches the ORM model (alembic's autogenerate finds no
difference about it), downgrades to the revision before it (the table is gone, the older
ones stay) and upgrades back, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect

from ppe.service.store.db import alembic_config, make_engine
from ppe.service.store.models import Base


def round_trip(db_url: str, table: str, before: str, kept: str) -> Engine:
    """Upgrade to head, compare ``table`` with the models, downgrade to ``before`` (``table``
    gone, ``kept`` still there) and upgrade again; the engine is left open for more checks."""
    cfg = alembic_config(db_url)
    command.upgrade(cfg, "head")
    engine = make_engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert [d for d in diff if table in repr(d)] == []
    command.downgrade(cfg, before)
    names = inspect(engine).get_table_names()
    assert table not in names and kept in names
    command.upgrade(cfg, "head")
    assert table in inspect(engine).get_table_names()
    return engine


#: Foreign keys a table must keep through the round trip: (referred table, on delete).
FOREIGN = {
    "runs": [("served_log", "SET NULL")],
    "templates": [("api_tokens", "SET NULL")],
    "host_profiles": [("resources", "CASCADE")],
    "phase_probes": [("phase_signatures", "CASCADE"), ("resources", "CASCADE")],
}


@pytest.mark.parametrize(
    ("table", "before", "kept"),
    [
        ("runs", "0003", "api_tokens"),
        ("empirical_models", "0004", "runs"),
        ("templates", "0005", "empirical_models"),
        ("couplings", "0006", "templates"),
        ("resource_groups", "0007", "couplings"),
        ("host_profiles", "0008", "resource_groups"),
        ("signatures", "0008", "resource_groups"),
        ("whatif_jobs", "0009", "host_profiles"),
        ("phase_signatures", "0010", "whatif_jobs"),
        ("phase_probes", "0010", "whatif_jobs"),
    ],
)
def test_a_migration_matches_its_model_and_round_trips(
    db_url: str, table: str, before: str, kept: str
) -> None:
    engine = round_trip(db_url, table, before, kept)
    try:
        fks = inspect(engine).get_foreign_keys(table)
        got = [(fk["referred_table"], fk["options"].get("ondelete")) for fk in fks]
        assert sorted(got) == sorted(FOREIGN.get(table, []))  # the order is per dialect
    finally:
        engine.dispose()
