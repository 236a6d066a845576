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

/* What a service does with one request: 0, with *result the payload to
 * answer with (NULL: an empty answer), or -1 with errno and *errmsg (NULL:
 * errno's own text).  service_cb answers.
 */
typedef int (*service_f) (flux_plugin_t *p, const flux_msg_t *msg,
                          json_t **result, const char **errmsg);

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

/* A request {id, env}: the active RSA job it names, and env (not checked
 * yet); NULL with errno (and errmsg) set. */
static struct rsa_job *env_request (flux_plugin_t *p, const flux_msg_t *msg,
                                    json_t **env, const char **errmsg)
{
    flux_jobid_t id;

    if (flux_request_unpack (msg, NULL, "{s:I s:o}", "id", &id, "env", env) < 0)
        return NULL;
    return active_job (p, id, errmsg);
}

/* job-manager.rsa.answer {id, env}: the service's start decision */
static int answer (flux_plugin_t *p, const flux_msg_t *msg, json_t **result,
                   const char **errmsg)
{
    json_t *env;
    struct rsa_job *job;

    if (!(job = env_request (p, msg, &env, errmsg)))
        return -1;
    if (job->phase != HOLDING) {
        *errmsg = job->phase == DONE ? "job was already released"
                                     : "job is not starting yet";
        errno = EINVAL;
        return -1;
    }
    if (!json_is_object (env) && !json_is_null (env)) {
        *errmsg = "env must be an object or null";
        errno = EPROTO;
        return -1;
    }
    return rsa_release_job (job, env, 0);
}

/* job-manager.rsa.offer {id, env}: start with env at once, if it runs */
static int offer (flux_plugin_t *p, const flux_msg_t *msg, json_t **result,
                  const char **errmsg)
{
    json_t *env;
    struct rsa_job *job;

    if (!(job = env_request (p, msg, &env, errmsg)))
        return -1;
    if (!json_is_object (env)) {
        *errmsg = "env must be an object";
        errno = EPROTO;
        return -1;
    }
    if (job->phase != IDLE) {
        *errmsg = "job is starting or started already";
        errno = EINVAL;
        return -1;
    }
    json_t *offer = json_deep_copy (env);
    if (!offer || json_object_set_new (offer, "offered", json_true ()) < 0) {
        json_decref (offer);
        errno = ENOMEM;
        return -1;
    }
    json_decref (job->offer);
    job->offer = offer;
    return 0;
}

/* job-manager.rsa.withdraw {id} -> {withdrawn}: false only when the job
 * already started with the offer.  A job that is gone took nothing.
 */
static int withdraw (flux_plugin_t *p, const flux_msg_t *msg, json_t **result,
                     const char **errmsg)
{
    flux_jobid_t id;
    struct rsa_job *job;
    bool withdrawn = true;

    if (flux_request_unpack (msg, NULL, "{s:I}", "id", &id) < 0)
        return -1;
    if ((job = flux_jobtap_job_aux_get (p, id, JOB_AUX))) {
        if (job->offer_used)
            withdrawn = false;
        json_decref (job->offer);
        job->offer = NULL;
    }
    if (!(*result = json_pack ("{s:b}", "withdrawn", withdrawn))) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
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
static int post (flux_plugin_t *p, const flux_msg_t *msg, json_t **result,
                 const char **errmsg)
{
    flux_jobid_t id;
    const char *name;
    json_t *context;
    char event[64];

    if (flux_request_unpack (msg, NULL, "{s:I s:s s:o}", "id", &id, "name",
                             &name, "context", &context)
        < 0)
        return -1;
    if (!valid_event_name (name) || !json_is_object (context)) {
        *errmsg =
            "name must be lower-case letters and dashes, context an object";
        errno = EPROTO;
        return -1;
    }
    if (!active_job (p, id, errmsg))
        return -1;
    snprintf (event, sizeof (event), "rsa-%s", name);
    return flux_jobtap_event_post_pack (p, id, event, "O", context);
}

/* job-manager.rsa.writers {writers: {"<id>": data_out}}: the service's
 * whole table of ended jobs whose stage-out may still write into their
 * data_out (replaces the one before) */
static int writers (flux_plugin_t *p, const flux_msg_t *msg, json_t **result,
                    const char **errmsg)
{
    struct rsa_ctx *ctx = rsa_ctx (p);
    json_t *table;
    const char *key;
    json_t *path;

    if (flux_request_unpack (msg, NULL, "{s:o}", "writers", &table) < 0)
        return -1;
    json_object_foreach (table, key, path)
    {
        if (!json_is_string (path)) {
            *errmsg = "writers: each value must be a path";
            errno = EPROTO;
            return -1;
        }
    }
    json_decref (ctx->writers);
    ctx->writers = json_incref (table);
    return 0;
}

/* The services, by the last word of their topic (job-manager.rsa.<name>) */
static const struct {
    const char *name;
    service_f fn;
} services[] = {
    {"answer", answer},     {"post", post},       {"offer", offer},
    {"withdraw", withdraw}, {"writers", writers},
};

#define NSERVICES (sizeof (services) / sizeof (services[0]))

/* Every service's request: run its service_f and answer for it. */
static void service_cb (flux_t *h, flux_msg_handler_t *mh,
                        const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    const char *topic = "?";
    const char *name;
    json_t *result = NULL;
    const char *errmsg = NULL;
    int rc = -1;

    if (flux_msg_get_topic (msg, &topic) < 0)
        errno = EPROTO;
    else {
        name = strrchr (topic, '.') ? strrchr (topic, '.') + 1 : topic;
        errno = ENOSYS;
        for (size_t i = 0; i < NSERVICES; i++)
            if (!strcmp (services[i].name, name)) {
                rc = services[i].fn (p, msg, &result, &errmsg);
                break;
            }
    }
    if (rc < 0)
        rc = flux_respond_error (h, msg, errno, errmsg);
    else if (result)
        rc = flux_respond_pack (h, msg, "O", result);
    else
        rc = flux_respond (h, msg, NULL);
    if (rc < 0)
        flux_log_error (h, "rsa: %s: respond", topic);
    json_decref (result);
}

int rsa_services_register (flux_plugin_t *p)
{
    for (size_t i = 0; i < NSERVICES; i++)
        if (flux_jobtap_service_register (p, services[i].name, service_cb, p)
            < 0)
            return -1;
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
