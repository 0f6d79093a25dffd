package teamapi

import (
	"encoding/json"

	"github.com/teambus/teambus"
)

// As is a reply of API that is typed any (Brief, Show) as a *T: a value of
// T's type when the API ran on the team state, its JSON when it came over
// the bus. err, the call's error, is returned as it is.
func As[T any](v any, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	if p, ok := v.(*T); ok {
		return p, nil
	}
	b, ok := v.(json.RawMessage)
	if !ok {
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, teambus.Unavailablef("team service: undecodable answer: %w", err)
	}
	return &out, nil
}
