"""Prepare the demo: a superuser whose credentials (and API token) are printed, and demo data.

    python manage.py demo_setup

Safe to run again: the user is updated, not duplicated, and the demo data of
``agentstore.demo`` (what ``manage.py agentstore demo`` seeds) is created only once.
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token

from agentstore.demo import seed_all


class Command(BaseCommand):
    help = "Create (or reset) the demo superuser and print its credentials."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo", help="(default: %(default)r)")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        password = os.environ.get("AGENTSTORE_DEMO_PASSWORD", "agentstore-demo")
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        token, _ = Token.objects.get_or_create(user=user)
        verb = "Created" if created else "Reset"
        self.stdout.write(self.style.SUCCESS(f"{verb} demo superuser."))
        self.stdout.write(f"  username:  {username}")
        self.stdout.write(f"  password:  {password}")
        self.stdout.write(f"  API token: {token.key}")
        for line in seed_all(user):
            self.stdout.write(f"  {line}")
        # The demo's offline runner (docs/runs.md): an agent turn the worker executes.
        self.stdout.write(
            "  Try a run: manage.py agentstore start-run weather "
            '--input "What is the weather in Paris?" --wait 60  '
            "(with manage.py agentstore worker in another terminal)"
        )
