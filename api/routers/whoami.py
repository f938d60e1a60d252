"""GET /v1/whoami: the calling key's tenant and scopes, so a client (the admin page) calls
only the routes the key may use instead of learning it from a 403."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.api.deps import PrincipalDep
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.records.schemas import WhoAmI
from memoryd.tenancy.api_keys import WHOAMI, KeyScope

router = APIRouter(tags=["keys"], responses=ERROR_RESPONSES)


@router.get(WHOAMI, response_model=WhoAmI)
async def whoami(principal: PrincipalDep) -> WhoAmI:
    """The key's id (never the key), its tenant (null for an operator key) and its scopes.

    Any valid key, whatever its scopes; 401 for none.
    """
    operator = KeyScope.OPERATOR in principal.scopes
    return WhoAmI(key_id=principal.key_id, tenant_id=None if operator else principal.tenant,
                  scopes=sorted(s.value for s in principal.scopes), operator=operator)
