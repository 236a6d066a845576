"""What `flux rsa` asks the rsa service: one RPC (saying so when the
service is not loaded), the records the caller may see, and `flux rsa
stats`, the service's figures as it gives them."""

import json

import flux


def rpc(h, topic, payload):
    try:
        return h.rpc(topic, payload).get()
    except OSError as exc:
        if exc.errno == 38:  # ENOSYS
            raise SystemExit(
                "flux-rsa: the rsa service is not loaded in this instance "
                "(configure [rsa] or run `flux module load rsa`)"
            ) from None
        raise


def ask_status(h, jobids=()):
    """The service's answer: the records the caller may see, and who the
    caller is to the service (userid, instance owner or not)."""
    return rpc(h, "rsa.status", {"jobids": [int(j) for j in jobids]})


def records(h, jobids=()):
    return ask_status(h, jobids)["jobs"]


def cmd_stats(args):
    print(json.dumps(rpc(flux.Flux(), "rsa.stats", {})))
