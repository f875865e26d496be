package queuetree

import (
	"time"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

// SpecOf translates aisched's Queue into the one model: its amounts in
// base units, its parent, default, half-life, and the usage history its
// status kept. The job queue reads live Queues with it, and the simulator
// the queues of a scenario.
func SpecOf(q *aischedv1alpha1.Queue) Spec {
	s := Spec{Name: q.Name, Object: "aischedqueue " + q.Name, Parent: q.Spec.Parent, Default: q.Spec.Default,
		Resources: map[string]Amounts{}, HalfLife: time.Duration(q.Spec.UsageHalfLifeSeconds) * time.Second,
		History: map[string]int64{}}
	for _, r := range q.Spec.Resources {
		a := Amounts{Limit: Unlimited, Lending: Unlimited, Weight: 1}
		if r.Guaranteed != nil {
			a.Guaranteed = Base(r.Name, *r.Guaranteed)
		}
		if r.Limit != nil {
			a.Limit = Base(r.Name, *r.Limit)
		}
		if r.LendingLimit != nil {
			a.Lending = Base(r.Name, *r.LendingLimit)
		}
		if r.Weight != nil {
			a.Weight = int64(*r.Weight)
		}
		s.Resources[r.Name] = a
	}
	for _, h := range q.Status.UsageHistory {
		s.History[h.Name] = Base(h.Name, h.Average)
	}
	return s
}
