"""Transfer bundles: one session in one checked zip file, moved between machines or stores (I/O).

`_bundle_transfer` exports and imports, `_bundle_check` checks a bundle whole before anything is
written, `_bundle_manifest` is its format and `_bundle_adopt` what an import leaves out. Private:
`lamina.session` exports these names.
"""

from lamina.session._bundle._bundle_check import BundleLimits, check_bundle
from lamina.session._bundle._bundle_transfer import ExportResult, ImportResult, export_session, import_session

__all__ = ["BundleLimits", "ExportResult", "ImportResult", "check_bundle", "export_session", "import_session"]
