"""The console's screens: help, link detail, fault form, confirmation, compare."""
