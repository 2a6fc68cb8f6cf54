"""Dagster Pipes clients for probes on other hosts: over ssh (no built-in Pipes ssh client exists) and, for
a probe in a local subprocess, Dagster's own ``PipesSubprocessClient``.

``PipesSshClient.run`` opens a Pipes session, passes its bootstrap variables through ``env`` on the remote
command line (they are base64, so shell-safe), reads the Pipes protocol messages from the remote stdout
(every other line is forwarded to this process's stdout, i.e. the compute log), and raises on a non-zero
exit. ``fetch`` then copies a file the remote landed (``ssh HOST cat PATH``). Authentication is whatever
``ssh`` is given (``-i KEY``, an agent, ``~/.ssh/config``); ``BatchMode=yes`` so it never prompts.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator, Mapping, Sequence

import dagster as dg
from dagster_pipes import PIPES_PROTOCOL_VERSION_FIELD

SSH_BASE = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10")


class PipesStdoutMessageReader(dg.PipesMessageReader):
    """Messages arrive on the external process's stdout: the client reads them line by line."""

    @contextmanager
    def read_messages(self, handler: dg.PipesMessageHandler) -> Iterator[dict]:
        yield {"stdio": "stdout"}  # dagster-pipes' default writer then writes protocol lines to stdout

    def no_messages_debug_text(self) -> str:
        return "Expected Pipes messages on the remote command's stdout."


def handle_line(handler: dg.PipesMessageHandler, line: str) -> bool:
    """Hand a protocol line to Dagster; True when it was one (other lines are the remote's own output)."""
    try:
        message = json.loads(line)
    except ValueError:
        return False
    if not isinstance(message, dict) or PIPES_PROTOCOL_VERSION_FIELD not in message:
        return False
    handler.handle_message(message)
    return True


class PipesSshClient(dg.PipesClient):
    """Run a command on ``destination`` over ssh inside a Pipes session."""

    def __init__(self, destination: str, ssh_options: Sequence[str] = (), ssh: Sequence[str] = SSH_BASE):
        self.destination = destination
        self.ssh_command = [*ssh, *ssh_options, destination]

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    def run(  # type: ignore[override]
        self,
        *,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        command: Sequence[str],
        extras: Mapping[str, object] | None = None,
        cwd: str | None = None,
    ) -> dg.PipesClientCompletedInvocation:
        with dg.open_pipes_session(
            context=context,
            context_injector=dg.PipesEnvContextInjector(),
            message_reader=PipesStdoutMessageReader(),
            extras=dict(extras or {}),
        ) as session:
            env = [f"{key}={value}" for key, value in session.get_bootstrap_env_vars().items()]
            remote = " ".join(["env", *env, *map(shlex.quote, command)])
            if cwd:
                remote = f"cd {shlex.quote(cwd)} && {remote}"
            process = subprocess.Popen([*self.ssh_command, remote], stdout=subprocess.PIPE, text=True)
            assert process.stdout is not None
            for line in process.stdout:
                if not handle_line(session.message_handler, line.rstrip("\n")):
                    sys.stdout.write(line)
            if process.wait() != 0:
                raise dg.Failure(f"remote command on {self.destination} exited {process.returncode}")
        return dg.PipesClientCompletedInvocation(session)

    def fetch(self, remote_path: str, timeout_s: float = 120.0) -> bytes:
        """The bytes of a file on the remote host."""
        done = subprocess.run(
            [*self.ssh_command, f"cat {shlex.quote(remote_path)}"], capture_output=True, timeout=timeout_s
        )
        if done.returncode != 0:
            raise dg.Failure(f"could not read {remote_path} on {self.destination}: {done.stderr.decode()[-500:]}")
        return done.stdout
