"""Workspace files an agent works with: project context files, skills, memory, attachments (I/O)."""

from lamina.workspace._confine import Located, PathEscapeError, locate, outside_roots
from lamina.workspace._context_files import (
    CONTEXT_FILE_NAMES,
    SKIPPED_DIR_NAMES,
    TRUNCATION_MARK,
    ContextFile,
    ContextFileScan,
    SkippedPath,
    find_context_files,
    nearest_context_files,
)
from lamina.workspace._context_finder import ContextFileFinder
from lamina.workspace._globs import GlobError, PathGlob, compile_glob, split_glob
from lamina.workspace._preferences import (
    Preferences,
    PreferencesError,
)
from lamina.workspace._project import (
    PROJECT_FILE,
    ProjectFileError,
    ProjectManifest,
    load_project,
)
from lamina.workspace._project_memory import (
    ProjectMemory,
)
from lamina.workspace._skill_catalogue import skill_catalogue_part
from lamina.workspace._skill_mentions import MentionResolution, parse_skill_mentions, resolve_mentions
from lamina.workspace._skills import (
    Skill,
    SkillProblem,
    SkillScan,
    SkillStamps,
    find_skills,
    skill_stamps,
)
from lamina.workspace._stable import (
    WorkspaceContext,
    WorkspaceSnapshot,
    detect_platform,
    load_preset,
)
from lamina.workspace._trust import (
    TrustedWorkspace,
    WorkspaceTrust,
    revoke_trust,
    trust_workspace,
    trusted_workspaces,
    workspace_trust,
)
from lamina.workspace._walk import FolderListing, WalkedFile, WalkedFolder, WalkPolicy, walk_folders

__all__ = [
    "CONTEXT_FILE_NAMES",
    "PROJECT_FILE",
    "SKIPPED_DIR_NAMES",
    "TRUNCATION_MARK",
    "ContextFile",
    "ContextFileFinder",
    "ContextFileScan",
    "FolderListing",
    "GlobError",
    "Located",
    "MentionResolution",
    "PathEscapeError",
    "PathGlob",
    "Preferences",
    "PreferencesError",
    "ProjectFileError",
    "ProjectManifest",
    "ProjectMemory",
    "Skill",
    "SkillProblem",
    "SkillScan",
    "SkillStamps",
    "SkippedPath",
    "TrustedWorkspace",
    "WalkPolicy",
    "WalkedFile",
    "WalkedFolder",
    "WorkspaceContext",
    "WorkspaceSnapshot",
    "WorkspaceTrust",
    "compile_glob",
    "detect_platform",
    "find_context_files",
    "find_skills",
    "load_preset",
    "load_project",
    "locate",
    "nearest_context_files",
    "outside_roots",
    "parse_skill_mentions",
    "resolve_mentions",
    "revoke_trust",
    "skill_catalogue_part",
    "skill_stamps",
    "split_glob",
    "trust_workspace",
    "trusted_workspaces",
    "walk_folders",
    "workspace_trust",
]
