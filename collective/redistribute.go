package collective

import "errors"

var errRedistributionNotBuilt = errors.New("collective: redistribution planners not built yet")

// PlanRedistribution plans a redistribution. (Stub: being written.)
func PlanRedistribution(r *Redistribution, algo Algorithm, opt Options) (*Plan, error) {
	return nil, errRedistributionNotBuilt
}

// SimulateRedistribution evaluates a redistribution plan. (Stub.)
func SimulateRedistribution(r *Redistribution, p *Plan) (*Plan, error) {
	return nil, errRedistributionNotBuilt
}

// ValidateRedistribution checks a redistribution plan against its pattern. (Stub.)
func ValidateRedistribution(r *Redistribution, p *Plan) error { return errRedistributionNotBuilt }
