"""job-ingest validator for RSA jobs: refuse bad ``attributes.system.rsa``
at submit, with one line naming the key, the value and the fix.

    [ingest.validator]
    plugins = ["jobspec", "<python site dir>/flux_rsa/validate.py"]
"""

import errno

from flux.job.validator import ValidatorPlugin

from flux_rsa.checks import check_request


class Validator(ValidatorPlugin):
    def validate(self, job):
        try:
            attrs = job.jobspec["attributes"]["system"]["rsa"]
        except (KeyError, TypeError):
            return None
        why = check_request(attrs, job.userid)
        if why:
            return (errno.EINVAL, why)
        return None
