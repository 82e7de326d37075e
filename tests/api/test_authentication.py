"""agentstore's lean TokenAuthentication behaves exactly like DRF's."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication as DRFTokenAuthentication
from rest_framework.authtoken.models import Token

from agentstore.api.authentication import TokenAuthentication


def test_same_user_and_token_as_drf(alice: Any) -> None:
    key = Token.objects.create(user=alice).key
    ours, ours_token = TokenAuthentication().authenticate_credentials(key)
    theirs, theirs_token = DRFTokenAuthentication().authenticate_credentials(key)
    assert ours == theirs and ours.pk == alice.pk
    assert (ours.username, ours.is_active, ours.is_staff) == ("alice", True, False)
    assert ours_token.key == theirs_token.key == key
    assert ours_token.user == alice
    # Fields that were not loaded still read correctly (lazily).
    assert ours.date_joined == alice.date_joined
    assert ours.check_password("pw-alice-123")


def test_unknown_token_and_inactive_user_are_refused(alice: Any) -> None:
    with pytest.raises(exceptions.AuthenticationFailed, match="Invalid token"):
        TokenAuthentication().authenticate_credentials("nope")
    key = Token.objects.create(user=alice).key
    alice.is_active = False
    alice.save()
    with pytest.raises(exceptions.AuthenticationFailed, match="inactive"):
        TokenAuthentication().authenticate_credentials(key)
