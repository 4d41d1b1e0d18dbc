"""fabtop's operator console (Textual) and its command-line interface."""
