"""flux-rsa: the RAMDISK Storage Accelerator for the Flux resource manager."""
