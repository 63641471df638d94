package collective

import "errors"

var errExchangeNotBuilt = errors.New("collective: total-exchange planners not built yet")

// PlanExchange plans a total exchange. (Stub: being written.)
func PlanExchange(m *Model, x *Exchange, algo Algorithm, opt Options) (*Plan, error) {
	return nil, errExchangeNotBuilt
}

// SimulateExchange evaluates a total-exchange plan under m. (Stub.)
func SimulateExchange(m *Model, p *Plan) (*Plan, error) { return nil, errExchangeNotBuilt }

// ValidateExchange checks a total-exchange plan against its pattern. (Stub.)
func ValidateExchange(x *Exchange, p *Plan) error { return errExchangeNotBuilt }
