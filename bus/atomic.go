package bus

import (
	"encoding/json"

	"github.com/teambus/teambus/internal/atomicfile"
)

// writeFileAtomic writes v as JSON to path, mode 0600, durably.
func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}
