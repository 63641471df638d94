package collective

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxProblemRanks bounds the size of a decoded problem so that a hostile
// file cannot make the planner allocate without limit.
const MaxProblemRanks = 4096

// ErrProblem is matched (with errors.Is) by every error that rejects a
// problem file.
var ErrProblem = errors.New("collective: invalid problem")

// Problem is the input of `hetbench plan`: one pattern together with the
// part of the cost model it needs. The JSON format is documented in
// docs/plan-format.md; an unknown (misspelt) field is an error that names
// it.
//
//	alltoall:     {"kind":"alltoall","ranks":P,"latency":[[s]],"bandwidth":[[bytes/s]],"bytes":[[int]]}
//	multicast:    {"kind":"multicast","ranks":N,"send_overhead":[{"const":s,"per_byte":s}],
//	               "recv_overhead":[...],"per_byte":[[s]],"messages":[{"source":k,"bytes":l,"dests":[...]}]}
//	redistribute: {"kind":"redistribute","senders":n1,"receivers":n2,"bytes":[[int]],"rate":bytes/s,"k":k,"setup":beta}
type Problem struct {
	Kind  Kind `json:"kind"`
	Ranks int  `json:"ranks,omitempty"`
	// Comment is free text about the problem (where it comes from); the
	// planners ignore it.
	Comment string `json:"comment,omitempty"`

	Latency   [][]float64 `json:"latency,omitempty"`
	Bandwidth [][]float64 `json:"bandwidth,omitempty"`
	// Rails is accepted, so that a probed model file (hetbench probe
	// -out) plus a pattern is a problem; the planners use the top-level
	// matrices.
	Rails        []Rail      `json:"rails,omitempty"`
	PerByte      [][]float64 `json:"per_byte,omitempty"`
	SendOverhead []Overhead  `json:"send_overhead,omitempty"`
	RecvOverhead []Overhead  `json:"recv_overhead,omitempty"`

	Bytes    [][]int64 `json:"bytes,omitempty"`
	Messages []Message `json:"messages,omitempty"`

	Senders   int     `json:"senders,omitempty"`
	Receivers int     `json:"receivers,omitempty"`
	Rate      float64 `json:"rate,omitempty"`
	K         int     `json:"k,omitempty"`
	Setup     float64 `json:"setup,omitempty"`
}

// DecodeProblem reads one problem from r and validates it. Every rejection
// matches ErrProblem and says what was wrong.
func DecodeProblem(r io.Reader) (*Problem, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("%w: reading: %v", ErrProblem, err)
	}
	return ParseProblem(data)
}

// ParseProblem decodes and validates one problem from JSON.
func ParseProblem(data []byte) (*Problem, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Problem
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProblem, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the problem object", ErrProblem)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks the problem for its kind. Errors match ErrProblem.
func (p *Problem) Validate() error {
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w: %v", ErrProblem, err)
	}
	switch p.Kind {
	case KindAlltoall:
		if err := p.checkRanks(); err != nil {
			return wrap(err)
		}
		if p.Latency == nil || p.Bandwidth == nil {
			return wrap(fmt.Errorf("alltoall needs latency and bandwidth matrices"))
		}
		if err := p.Model().Validate(); err != nil {
			return wrap(err)
		}
		return wrap(p.Exchange().Validate(p.Ranks))
	case KindMulticast:
		if err := p.checkRanks(); err != nil {
			return wrap(err)
		}
		if p.PerByte == nil && p.Bandwidth == nil {
			return wrap(fmt.Errorf("multicast needs per_byte (or bandwidth)"))
		}
		m := p.Model()
		if m.Size() != p.Ranks {
			return wrap(fmt.Errorf("model describes %d nodes, ranks is %d", m.Size(), p.Ranks))
		}
		if err := m.Validate(); err != nil {
			return wrap(err)
		}
		return wrap(p.Multicast().Validate(p.Ranks))
	case KindRedistribute:
		if p.Senders > MaxProblemRanks || p.Receivers > MaxProblemRanks {
			return wrap(fmt.Errorf("senders/receivers above %d", MaxProblemRanks))
		}
		return wrap(p.Redistribution().Validate())
	case "":
		return wrap(fmt.Errorf("missing \"kind\" (alltoall, multicast or redistribute)"))
	default:
		return wrap(fmt.Errorf("unknown kind %q (want alltoall, multicast or redistribute)", p.Kind))
	}
}

func (p *Problem) checkRanks() error {
	if p.Ranks < 1 {
		return fmt.Errorf("ranks = %d: must be at least 1", p.Ranks)
	}
	if p.Ranks > MaxProblemRanks {
		return fmt.Errorf("ranks = %d: above the limit %d", p.Ranks, MaxProblemRanks)
	}
	return nil
}

// Model returns the cost model part of the problem (alltoall, multicast).
func (p *Problem) Model() *Model {
	return &Model{Latency: p.Latency, Bandwidth: p.Bandwidth, PerByte: p.PerByte, SendOverhead: p.SendOverhead, RecvOverhead: p.RecvOverhead}
}

// Exchange returns the total-exchange pattern of an alltoall problem.
func (p *Problem) Exchange() *Exchange { return &Exchange{Bytes: p.Bytes} }

// Multicast returns the pattern of a multicast problem.
func (p *Problem) Multicast() *Multicast { return &Multicast{Messages: p.Messages} }

// Redistribution returns the pattern of a redistribute problem.
func (p *Problem) Redistribution() *Redistribution {
	return &Redistribution{Senders: p.Senders, Receivers: p.Receivers, Bytes: p.Bytes, Rate: p.Rate, K: p.K, Setup: p.Setup}
}
