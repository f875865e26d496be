// Package jobqueue is aisched's job queue: pod groups are admitted whole,
// by priority then age, when the whole group fits its namespace's
// ResourceQuota and min-available of its members can be placed on the
// nodes' free resources. The first group that fits the cluster but not
// its free resources holds a reservation, so nothing starves; smaller
// groups backfill around it; a group of higher priority preempts whole
// groups of lower priority. Admission runs on events (pods, nodes, quotas,
// PodGroups), many groups per pass. The scheduler holds back the members
// of groups not admitted (Coscheduling's PreEnqueue calls Gate), so a job
// created by any tool goes through the queue.
//
// Compute is the decision, a pure function of an Input; the Queue gathers
// the Input from the scheduler's informers and the GPU ledger, and acts on
// the Plan. README.md describes the model with a worked example and lists
// the file of each job.
package jobqueue
