"""JupyterLab settings for this tutorial: nothing calls home, nothing pops up.

``make lab`` and the browser check (tests/test_notebook_browser.py) both start
JupyterLab with ``--config=.jupyter/jupyter_lab_config.py``. The server side
turns off the news feed, the update check and the PyPI extension manager; the
frontend defaults in ``lab/settings/overrides.json`` answer the "Jupyter news"
question with "Never", so no pop-up asks it. ``custom/custom.css`` replaces the red
"disconnected" icons of a saved knob by one line saying to run its cell (served
from ``JUPYTER_CONFIG_DIR/custom``: see the end of this file).
"""

from pathlib import Path

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.extension_manager = "readonly"
c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "lab" / "settings")
# custom/custom.css: a saved knob shows one grey "Run this cell to turn the knob." instead of
# ipywidgets' four red "disconnected" icons until its cell runs (issue 42). Jupyter Server serves
# it from <JUPYTER_CONFIG_DIR>/custom only (ServerApp.static_custom_path is not configurable), so
# `make lab` runs with JUPYTER_CONFIG_DIR=.jupyter and the browser check copies the folder into
# its throwaway config folder.
c.LabApp.custom_css = True
