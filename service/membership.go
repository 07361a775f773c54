package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Membership of a restarted member (InstanceID).
//
// A member killed without leaving (kill -9, an OOM kill, a node lost) keeps
// its partitions in the group until its session times out (SessionTimeout,
// 10 s by default), however fast its successor restores them. Kafka's cure
// is static membership (KIP-345: group.instance.id), which kafka-go's
// ConsumerGroup does not offer: only its protocol-level JoinGroup request
// carries a GroupInstanceID, and the ConsumerGroup never sets it. The
// service builds the part it needs on what kafka-go does offer: its group
// member joins with the client ID InstanceID (stable across restarts,
// unique in the group: a pod's name), and before joining, a process with an
// InstanceID asks the group coordinator for the group's members
// (DescribeGroups) and removes those with that client ID (LeaveGroup by
// member ID): a former process of this instance, dead or a zombie. The group
// rebalances at once instead of after the session timeout. A zombie that
// was still alive loses its generation as in any rebalance, and its writes
// are fenced by the changelog's ownership claims as always.

// evictFormerSelf removes from the group the memberships whose client ID is
// s.cfg.InstanceID, and returns how many it removed. It retries a
// coordinator that is not ready for at most the session timeout, after
// which a former membership has expired anyway.
func (s *Service) evictFormerSelf(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
	defer cancel()
	client := s.adminClient()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		n, err := s.evictOnce(ctx, client)
		if err == nil || !forming(err) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w; last error: %w", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// evictOnce is one attempt of evictFormerSelf.
func (s *Service) evictOnce(ctx context.Context, client *kafka.Client) (int, error) {
	desc, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{s.cfg.Group}})
	if err != nil {
		return 0, fmt.Errorf("describe group %s: %w", s.cfg.Group, err)
	}
	var former []kafka.LeaveGroupRequestMember
	for _, g := range desc.Groups {
		if errors.Is(g.Error, kafka.GroupIdNotFound) { // DescribeGroups v6+ on a group not formed yet
			continue
		}
		if g.Error != nil {
			return 0, fmt.Errorf("describe group %s: %w", s.cfg.Group, g.Error)
		}
		for _, m := range g.Members {
			if m.ClientID == s.cfg.InstanceID {
				former = append(former, kafka.LeaveGroupRequestMember{ID: m.MemberID})
			}
		}
	}
	if len(former) == 0 {
		return 0, nil
	}
	res, err := client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: s.cfg.Group, Members: former})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return 0, fmt.Errorf("remove %d former memberships of %s from group %s: %w", len(former), s.cfg.InstanceID, s.cfg.Group, err)
	}
	n := 0
	for _, m := range res.Members {
		switch {
		case m.Error == nil:
			n++
		case errors.Is(m.Error, kafka.UnknownMemberId): // expired or left meanwhile
		default:
			return n, fmt.Errorf("remove former membership %s of %s from group %s: %w", m.ID, s.cfg.InstanceID, s.cfg.Group, m.Error)
		}
	}
	return n, nil
}

// groupDialer is the dialer of the group's member: the configured one, with
// InstanceID as its client ID when set.
func (s *Service) groupDialer() *kafka.Dialer {
	if s.cfg.InstanceID == "" {
		return s.cfg.Dialer
	}
	d := *s.cfg.Dialer
	d.ClientID = s.cfg.InstanceID
	return &d
}
