/* topdir.h - the staged inputs' top directory (see topdir.c) */

#ifndef RSA_SHELL_TOPDIR_H
#define RSA_SHELL_TOPDIR_H

/* Give src, the RAM disk's in/ area (the staged copy's top), data_in's
 * mtime, group and mode as far as that exposes nothing; real is data_in's
 * real path (NULL: not known, nothing is exposed).  What cannot be
 * matched is not fatal: how in/ still differs is returned (to free), or
 * NULL when it does not.
 */
char *topdir_match (const char *src, const char *data_in, const char *real);

#endif /* !RSA_SHELL_TOPDIR_H */

/* vi: ts=4 sw=4 expandtab
 */
