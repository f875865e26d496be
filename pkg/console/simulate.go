package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aisched/aisched/pkg/sim/report"
)

// simulationTimeout bounds one simulation.
const simulationTimeout = 5 * time.Minute

// Scenario is a shipped scenario the simulations page offers.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// SimReport is what a simulation answers: for a scenario, its results as
// a table (a row per metric with its direction and meaning, a value per
// policy) and its plots as SVG; for a job, whatif's answer in words.
type SimReport struct {
	Title string `json:"title"`
	// Description is the scenario's.
	Description string `json:"description,omitempty"`
	// Policies and Rows are a scenario's results, medians over seeds.
	Policies []string     `json:"policies,omitempty"`
	Rows     []report.Row `json:"rows,omitempty"`
	// Text is whatif's answer, plain words.
	Text string `json:"text,omitempty"`
	// SVG is the plots, from aisched's own renderer (no scripts).
	SVG string `json:"svg,omitempty"`
}

type simulationRequest struct {
	// Scenario names a shipped scenario; or Manifest is a job for whatif.
	Scenario  string `json:"scenario,omitempty"`
	Manifest  string `json:"manifest,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

func (s *Server) listScenarios(w http.ResponseWriter, _ *http.Request, _ *clients, _ identity) {
	if s.opts.Simulations == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "simulations are off in this console"})
		return
	}
	writeJSON(w, http.StatusOK, s.opts.Simulations.scenarios())
}

// simulate runs one simulation at a time: each takes the CPU for seconds
// to minutes.
func (s *Server) simulate(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	if s.opts.Simulations == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "simulations are off in this console"})
		return
	}
	var req simulationRequest
	if !decode(w, r, &req) {
		return
	}
	if (req.Scenario == "") == (req.Manifest == "") {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "give scenario or manifest, one of them"})
		return
	}
	select {
	case s.sims <- struct{}{}:
		defer func() { <-s.sims }()
	default:
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "another simulation is running; try again when it ends"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), simulationTimeout)
	defer cancel()
	var (
		rep *SimReport
		err error
	)
	if req.Scenario != "" {
		rep, err = s.opts.Simulations.runScenario(ctx, req.Scenario)
	} else {
		if req.Namespace == "" {
			req.Namespace = "default"
		}
		rep, err = s.opts.Simulations.whatIf(ctx, c.kube, c.aisched, []byte(req.Manifest), req.Namespace)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("simulation: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
