"""Results for people and programs: one table model (`table.Table`) rendered to text,
Markdown, CSV and HTML (one module per format); the views of each kind of result (an op,
a chip, a model step, a sweep); whole reports (`pages`); the roofline's geometry (plain
data), its SVG writer, and label placement. The core never imports this layer."""

from .table import Column, Table

__all__ = ["Column", "Table"]
