# flux-rsa: start the RSA service at instance start-up, and stop its pool
# in order at shutdown (skipped by modprobe unless [rsa] is configured).

from flux.modprobe import task


def setup(context):
    context.load_modules(["rsa"])


# Cleanup commands run after the initial program, newest first: pushed
# after Flux's own (which cancel running jobs), ours runs before them, so
# RAM disks are destroyed by their holders instead of being killed.
@task("rsa-cleanup", ranks="0", after=["push-cleanup"], needs_config=["rsa"])
def rsa_cleanup(context):
    context.rpc(
        "runat.push", {"name": "cleanup", "commands": ["flux rsa pool --shutdown"]}
    ).get()
