# flux-rsa: start the RSA service at instance start-up (skipped by modprobe
# unless the [rsa] configuration table exists).


def setup(context):
    context.load_modules(["rsa"])
