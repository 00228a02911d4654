"""Named groups of resources: a system made of several hosts, named once.

A group is what Prophecy's systems database calls a system when it is more than one machine:
templates evaluate on it by name (``systems: ["rack1"]``), and runs may name it as their
``system``. Members must be registered resources; a group may not take a resource's name,
since a system's name then would mean two things.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Response, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.service.auth import OPERATE, READ, require
from ppe.service.deps import SessionDep, commit
from ppe.service.errors import CONFLICT, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import GroupIn, GroupOut, GroupPath
from ppe.service.store.models import Resource, ResourceGroup

router = APIRouter(tags=["resources"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)


def _out(g: ResourceGroup) -> GroupOut:
    return GroupOut(
        name=g.name, members=list(g.members), description=g.description, updated_at=g.updated_at
    )


def group_members(session: Session, name: str) -> list[str] | None:
    """The members of group ``name``, or None when no group has that name."""
    members = session.execute(
        select(ResourceGroup.members).where(ResourceGroup.name == name)
    ).scalar_one_or_none()
    return None if members is None else [str(m) for m in members]


def _group(session: Session, name: str) -> ResourceGroup:
    g = session.execute(
        select(ResourceGroup).where(ResourceGroup.name == name)
    ).scalar_one_or_none()
    if g is None:
        raise problem(404, f"unknown group {name!r}", "path.name")
    return g


@router.get("/groups", response_model=list[GroupOut])
def list_groups(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[GroupOut]:
    groups = session.execute(select(ResourceGroup).order_by(ResourceGroup.name)).scalars()
    return [_out(g) for g in groups]


@router.get("/groups/{name}", response_model=GroupOut, responses=NOT_FOUND)
def get_group(
    name: GroupPath, session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> GroupOut:
    return _out(_group(session, name))


@router.put("/groups/{name}", response_model=GroupOut, responses=CONFLICT)
def put_group(
    name: GroupPath,
    body: GroupIn,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*OPERATE))],
) -> GroupOut:
    """Create the group or replace its members and description."""
    if len(set(body.members)) != len(body.members):
        raise problem(422, "a resource is listed twice", "members")
    known = set(
        session.execute(select(Resource.name).where(Resource.name.in_(body.members))).scalars()
    )
    if session.execute(select(Resource.id).where(Resource.name == name)).first():
        raise problem(422, f"{name!r} is a resource's name; a group needs its own", "path.name")
    for i, member in enumerate(body.members):
        if member not in known:
            raise problem(
                422,
                f"unknown resource {member!r}: register it first (PUT /api/v1/resources/{member})",
                f"members[{i}]",
            )
    g = session.execute(
        select(ResourceGroup).where(ResourceGroup.name == name)
    ).scalar_one_or_none()
    if g is None:
        g = ResourceGroup(name=name, members=list(body.members), description=body.description)
        session.add(g)
    else:
        g.members, g.description, g.updated_at = list(body.members), body.description, time.time()
    commit(session)
    return _out(g)


@router.delete(
    "/groups/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=NOT_FOUND,
)
def delete_group(
    name: GroupPath, session: SessionDep, _role: Annotated[str, Depends(require(*OPERATE))]
) -> Response:
    session.delete(_group(session, name))
    commit(session)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
