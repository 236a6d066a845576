"""rsa: the RAMDISK Storage Accelerator service (a Flux broker module).

The service (flux_rsa.service) follows the job-manager journal, keeps one
record per RSA job in the KVS (rsa.jobs.<jobid>), runs the pool of RSA
nodes, and answers the rsa jobtap plugin and `flux rsa`; all decisions are
taken by flux_rsa.core.  This file only routes messages to the service and
its answers back.

    flux module load rsa          (or via modprobe when [rsa] is configured)
"""

import dataclasses
import errno

from flux.brokermod import BrokerModule, request_handler
from flux.constants import FLUX_ROLE_OWNER

from flux_rsa.core import BadConfig, Policy
from flux_rsa.core import events as E
from flux_rsa.service.pool_job import start_pool
from flux_rsa.service.service import Service
from flux_rsa.service.userns import job_namespaces


def _owner(msg):
    return bool(msg.rolemask & FLUX_ROLE_OWNER)


class RsaModule(BrokerModule):
    def __init__(self, h, *args):
        super().__init__(h, *args)
        # [rsa] paths = "auto": may job shells make their mount namespace here?
        self.userns, why = job_namespaces()
        try:
            policy = Policy.from_config(
                h.conf_get("rsa", default={}, update=True),
                imp=h.conf_get("exec.imp", default=""),
                userns=self.userns,
            )
        except BadConfig as exc:
            self.log.error(f"rsa: {exc}")
            raise
        if why and policy.paths == "auto":
            self.log.warning(
                f"rsa: jobs get rsa.paths=env unless they ask: job shells cannot make "
                f"a user namespace on this node ({why})"
            )
        self.service = Service(h, self.log, policy, launch_pool=start_pool)
        self.service.start()

    def run(self):
        try:
            super().run()
        finally:
            try:
                self.service.save_now()  # records are saved in batches: the last one
            except Exception as exc:
                self.log.error(f"rsa: saving records at unload: {exc!r}")

    def _reply(self, msg, fn):
        """Run fn() and answer with its result, or with a clear error."""
        try:
            self.handle.respond(msg, fn())
        except OSError as exc:
            self.handle.respond_error(
                msg, exc.errno or errno.EINVAL, exc.strerror or str(exc)
            )
        except Exception as exc:  # a bad request must never kill the module
            self.log.error(f"rsa: {msg.topic}: {exc!r}")
            self.handle.respond_error(msg, errno.EINVAL, f"{msg.topic}: {exc}")

    def _answer(self, msg):
        """answer(result) for an answer that comes later: a payload, or an
        OSError to answer as an error."""

        def answer(result):
            if isinstance(result, OSError):
                self.handle.respond_error(msg, result.errno, result.strerror)
            else:
                self.handle.respond(msg, result)

        return answer

    # --- job-manager (rsa jobtap plugin) and the pool: instance owner only ---

    @request_handler("start")
    def start_request(self, msg):
        def ack():
            self.service.on_start(int(msg.payload["id"]), msg.payload.get("ranks", ""))
            return {}

        self._reply(msg, ack)

    @request_handler("job-event")
    def job_event(self, msg):
        """Events of jobs that mention rsa, from the jobtap plugin, in order
        ({events: [...]}, no answer)."""
        events = msg.payload.get("events") if isinstance(msg.payload, dict) else None
        if not isinstance(events, list):
            self.log.error(f"rsa: job-event {msg.payload}: expected {{events: [...]}}")
            return
        for event in events:
            try:
                self.service.on_job_event(event)
            except Exception as exc:
                self.log.error(f"rsa: job-event {event}: {exc!r}")

    @request_handler("queue-moved")
    def queue_moved(self, msg):
        """A job left the queue while RSA jobs are active (jobtap plugin, no
        answer): the deck may move up."""
        self.service.arm_plan()

    @request_handler("afterstaged")
    def afterstaged(self, msg):
        """Answer when a job's outputs are settled (jobtap plugin: a job
        submitted with --dependency=afterstaged:JOBID waits for it)."""

        try:
            waiter = msg.payload.get("for")
            self.service.when_staged(
                int(msg.payload["id"]),
                self._answer(msg),
                None if waiter is None else int(waiter),
            )
        except Exception as exc:
            self.log.error(f"rsa: afterstaged {msg.payload}: {exc!r}")
            self.handle.respond_error(msg, errno.EINVAL, f"afterstaged: {exc}")

    @request_handler("pool-event")
    def pool_event(self, msg):
        def take():
            self.service.on_pool_event(msg.payload)
            return {}

        self._reply(msg, take)

    @request_handler("config-reload")
    def config_reload(self, msg):
        def reload():
            conf = (
                msg.payload.get("conf", msg.payload)
                if isinstance(msg.payload, dict)
                else {}
            )
            try:
                policy = Policy.from_config(
                    conf.get("rsa", {}),
                    imp=conf.get("exec", {}).get("imp", ""),
                    userns=self.userns,
                )
                self.service.policy = dataclasses.replace(
                    policy, pool_nodes=self.service.policy.pool_nodes
                )
            except BadConfig as exc:
                raise OSError(errno.EINVAL, str(exc)) from None
            return {}

        self._reply(msg, reload)

    # --- people (guests allowed; each sees and acts on their own jobs) ---

    @request_handler("stats", allow_guest=True)
    def stats(self, msg):
        self._reply(msg, self.service.stats)

    @request_handler("status", allow_guest=True)
    def status(self, msg):
        jobids = [int(j) for j in msg.payload.get("jobids", [])]
        caller = {"userid": msg.userid, "owner": _owner(msg)}
        self._reply(
            msg,
            lambda: {
                "jobs": self.service.status(jobids, msg.userid, _owner(msg)),
                "caller": caller,
            },
        )

    @request_handler("pool", allow_guest=True)
    def pool(self, msg):
        """The pool's capacity per RSA node, as its agent reports it."""
        link = self.service.pool
        if not link.ready:
            self.handle.respond(msg, {"ready": False, "nodes": []})
            return

        def answered(f):
            try:
                status = f.get()
                status["ready"] = True
                self.handle.respond(msg, status)
            except OSError as exc:
                self.handle.respond_error(
                    msg,
                    exc.errno or errno.EIO,
                    f"the RSA pool did not answer: {exc.strerror}",
                )

        link.rpc("status").then(answered)

    @request_handler("pool-shutdown")
    def pool_shutdown(self, msg):
        """Stop the pool in order (RAM disks destroyed), answer when it ended
        and the compute nodes let go of its image stores."""
        self.service.shut_down_pool(self._answer(msg))

    @request_handler("drain")
    def drain(self, msg):
        p = msg.payload
        self._reply(
            msg,
            lambda: self.service.drain(
                p["host"], p.get("reason"), undrain=bool(p.get("undrain"))
            ),
        )

    @request_handler("release-input", allow_guest=True)
    def release_input(self, msg):
        self._user_event(msg, lambda t: E.InputReleased(t, why="request"))

    @request_handler("retry", allow_guest=True)
    def retry(self, msg):
        self._user_event(msg, E.Retry)

    @request_handler("release", allow_guest=True)
    def release(self, msg):
        self._user_event(msg, E.Release)

    def _user_event(self, msg, make):
        import time

        self._reply(
            msg,
            lambda: self.service.request(
                int(msg.payload["id"]), make(time.time()), msg.userid, _owner(msg)
            ),
        )
