package collective

import "errors"

var errMulticastNotBuilt = errors.New("collective: multicast planners not built yet")

// PlanMulticast plans a multiple multicast. (Stub: being written.)
func PlanMulticast(m *Model, mc *Multicast, algo Algorithm, opt Options) (*Plan, error) {
	return nil, errMulticastNotBuilt
}

// SimulateMulticast evaluates a multicast plan under m. (Stub.)
func SimulateMulticast(m *Model, p *Plan) (*Plan, error) { return nil, errMulticastNotBuilt }

// ValidateMulticast checks a multicast plan against its pattern. (Stub.)
func ValidateMulticast(mc *Multicast, p *Plan) error { return errMulticastNotBuilt }
