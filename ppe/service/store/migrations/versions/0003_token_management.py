"""Token management and model ownership.

Tokens get an optional expiry, the time they were revoked and the time they were last used, so
operators can list and retire them. User models get the token that stored them: until now any
app token could overwrite any model by name. Existing models have no owner (only an admin may
replace them); existing tokens never expire.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("expires_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("revoked_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("last_used_at", sa.Float(), nullable=True))
    with op.batch_alter_table("user_models") as batch:
        batch.add_column(sa.Column("owner_token_id", Id, nullable=True))
        batch.create_foreign_key(
            "fk_user_models_owner_token",
            "api_tokens",
            ["owner_token_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("user_models") as batch:
        batch.drop_constraint("fk_user_models_owner_token", type_="foreignkey")
        batch.drop_column("owner_token_id")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("revoked_at")
        batch.drop_column("expires_at")
