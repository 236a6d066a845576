/* rpc.c - rsa jobtap plugin: the services it registers under
 * job-manager.rsa (the rsa service's requests: answer, offer, withdraw,
 * post, writers).
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "rsa.h"

/* Answer a job-manager.rsa.<topic> request: success (rc 0), or errno
 * with errmsg (NULL: errno's own text).
 */
static void respond (flux_t *h, const flux_msg_t *msg, const char *topic,
                     int rc, const char *errmsg)
{
    if ((rc == 0 ? flux_respond (h, msg, NULL)
                 : flux_respond_error (h, msg, errno, errmsg))
        < 0)
        flux_log_error (h, "rsa: %s: respond", topic);
}

/* The RSA state of active job id, or NULL with errno and errmsg set. */
static struct rsa_job *active_job (flux_plugin_t *p, flux_jobid_t id,
                                   const char **errmsg)
{
    struct rsa_job *job = flux_jobtap_job_aux_get (p, id, JOB_AUX);
    if (!job || !job->eligible) {
        *errmsg = "not an active RSA job";
        errno = ENOENT;
    }
    return job;
}

/* job-manager.rsa.answer {id, env}: the service's start decision */
static void answer_cb (flux_t *h, flux_msg_handler_t *mh, const flux_msg_t *msg,
                       void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    json_t *env = NULL;
    struct rsa_job *job;
    const char *errmsg = NULL;

    if (flux_request_unpack (msg, NULL, "{s:I s:o}", "id", &id, "env", &env)
        < 0)
        goto error;
    if (!(job = active_job (p, id, &errmsg)))
        goto error;
    if (job->phase != HOLDING) {
        errmsg = job->phase == DONE ? "job was already released"
                                    : "job is not starting yet";
        errno = EINVAL;
        goto error;
    }
    if (!json_is_object (env) && !json_is_null (env)) {
        errmsg = "env must be an object or null";
        errno = EPROTO;
        goto error;
    }
    if (rsa_release_job (job, env, 0) < 0)
        goto error;
    respond (h, msg, "answer", 0, NULL);
    return;
error:
    respond (h, msg, "answer", -1, errmsg);
}

/* job-manager.rsa.offer {id, env}: start with env at once, if it runs */
static void offer_cb (flux_t *h, flux_msg_handler_t *mh, const flux_msg_t *msg,
                      void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    json_t *env = NULL;
    struct rsa_job *job;
    const char *errmsg = NULL;

    if (flux_request_unpack (msg, NULL, "{s:I s:o}", "id", &id, "env", &env)
        < 0)
        goto error;
    if (!json_is_object (env)) {
        errmsg = "env must be an object";
        errno = EPROTO;
        goto error;
    }
    if (!(job = active_job (p, id, &errmsg)))
        goto error;
    if (job->phase != IDLE) {
        errmsg = "job is starting or started already";
        errno = EINVAL;
        goto error;
    }
    json_t *offer = json_deep_copy (env);
    if (!offer || json_object_set_new (offer, "offered", json_true ()) < 0) {
        json_decref (offer);
        errno = ENOMEM;
        goto error;
    }
    json_decref (job->offer);
    job->offer = offer;
    respond (h, msg, "offer", 0, NULL);
    return;
error:
    respond (h, msg, "offer", -1, errmsg);
}

/* job-manager.rsa.withdraw {id} -> {withdrawn}: false only when the job
 * already started with the offer.  A job that is gone took nothing.
 */
static void withdraw_cb (flux_t *h, flux_msg_handler_t *mh,
                         const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    struct rsa_job *job;
    bool withdrawn = true;

    if (flux_request_unpack (msg, NULL, "{s:I}", "id", &id) < 0) {
        respond (h, msg, "withdraw", -1, NULL);
        return;
    }
    if ((job = flux_jobtap_job_aux_get (p, id, JOB_AUX))) {
        if (job->offer_used)
            withdrawn = false;
        json_decref (job->offer);
        job->offer = NULL;
    }
    if (flux_respond_pack (h, msg, "{s:b}", "withdrawn", withdrawn) < 0)
        flux_log_error (h, "rsa: withdraw: respond");
}

static bool valid_event_name (const char *name)
{
    if (!name || !*name || strlen (name) > 32)
        return false;
    for (const char *c = name; *c; c++)
        if (!islower (*c) && *c != '-')
            return false;
    return true;
}

/* job-manager.rsa.post {id, name, context}: post "rsa-<name>" */
static void post_cb (flux_t *h, flux_msg_handler_t *mh, const flux_msg_t *msg,
                     void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    const char *name;
    json_t *context;
    char event[64];
    const char *errmsg = NULL;

    if (flux_request_unpack (msg, NULL, "{s:I s:s s:o}", "id", &id, "name",
                             &name, "context", &context)
        < 0)
        goto error;
    if (!valid_event_name (name) || !json_is_object (context)) {
        errmsg =
            "name must be lower-case letters and dashes, context an object";
        errno = EPROTO;
        goto error;
    }
    if (!active_job (p, id, &errmsg))
        goto error;
    snprintf (event, sizeof (event), "rsa-%s", name);
    if (flux_jobtap_event_post_pack (p, id, event, "O", context) < 0)
        goto error;
    respond (h, msg, "post", 0, NULL);
    return;
error:
    respond (h, msg, "post", -1, errmsg);
}

/* job-manager.rsa.writers {writers: {"<id>": data_out}}: the service's
 * whole table of ended jobs whose stage-out may still write into their
 * data_out (replaces the one before) */
static void writers_cb (flux_t *h, flux_msg_handler_t *mh,
                        const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    struct rsa_ctx *ctx = rsa_ctx (p);
    json_t *writers;
    const char *key;
    json_t *path;

    if (flux_request_unpack (msg, NULL, "{s:o}", "writers", &writers) < 0) {
        respond (h, msg, "writers", -1, NULL);
        return;
    }
    json_object_foreach (writers, key, path)
    {
        if (!json_is_string (path)) {
            errno = EPROTO;
            respond (h, msg, "writers", -1,
                     "writers: each value must be a path");
            return;
        }
    }
    json_decref (ctx->writers);
    ctx->writers = json_incref (writers);
    respond (h, msg, "writers", 0, NULL);
}

int rsa_services_register (flux_plugin_t *p)
{
    if (flux_jobtap_service_register (p, "answer", answer_cb, p) < 0
        || flux_jobtap_service_register (p, "post", post_cb, p) < 0
        || flux_jobtap_service_register (p, "offer", offer_cb, p) < 0
        || flux_jobtap_service_register (p, "withdraw", withdraw_cb, p) < 0
        || flux_jobtap_service_register (p, "writers", writers_cb, p) < 0)
        return -1;
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
