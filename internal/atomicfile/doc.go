// Package atomicfile writes files so that a crash at any moment leaves
// either the old content or the new one, never a torn file: the content
// goes to a temporary file in the same directory, which is fsynced, given
// its mode and renamed over the target; then the directory is fsynced so
// the rename itself survives a power cut.
//
// Every file teambus writes that a later run reads (the discovery file,
// hook bindings, Claude Code settings, checkpoint and event exports) goes
// through here.
package atomicfile
