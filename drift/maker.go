package drift

import "encoding/json"

// Maker builds detectors of one name and parameters, parsed and validated
// once: a key's detectors are made each time a key is created or restored,
// and parsing the parameters' JSON for each was a third of decoding a key
// (BenchmarkRestore's profile). A Maker is safe for concurrent use; the
// detectors it makes are not.
type Maker struct {
	proto fresh
}

// fresh is a detector that can copy itself while it has seen no value: its
// copy is a new detector of the same parameters, sharing nothing with it.
type fresh interface {
	Detector
	freshCopy() Detector
}

// NewMaker parses and checks detector name's parameters (New's rules and
// errors).
func NewMaker(name string, params json.RawMessage) (*Maker, error) {
	d, err := New(name, params)
	if err != nil {
		return nil, err
	}
	return &Maker{proto: d.(fresh)}, nil
}

// New returns a detector that has seen no value.
func (m *Maker) New() Detector { return m.proto.freshCopy() }

// The copies: every detector's fresh state is its parameters and zeros
// (an ADWIN's rows are nil until its first value).
func (d *adwin) freshCopy() Detector       { c := *d; c.rows = nil; return &c }
func (d *ddm) freshCopy() Detector         { c := *d; return &c }
func (d *eddm) freshCopy() Detector        { c := *d; return &c }
func (d *hddmA) freshCopy() Detector       { c := *d; return &c }
func (d *pageHinkley) freshCopy() Detector { c := *d; return &c }
