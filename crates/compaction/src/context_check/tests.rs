//! The context check's rules, as properties over random policies, settings and measures, and
//! at the defaults.

use proptest::prelude::*;

use super::*;

/// A policy, the agent's settings and one measure.
#[derive(Debug, Clone)]
struct Case {
    check: ContextCheck,
    policy: ContextPolicy,
    measure: ContextMeasure,
}

fn point() -> impl Strategy<Value = CheckPoint> {
    prop_oneof![Just(CheckPoint::BeforeCall), Just(CheckPoint::AfterTurn)]
}

fn case() -> impl Strategy<Value = Case> {
    (
        1_000usize..200_000,
        0usize..=25,
        (0.05f64..0.95, 0.0f64..1.0),
        (
            any::<bool>(),
            proptest::option::weighted(0.75, 0.0f64..1.2),
            any::<bool>(),
        ),
        point(),
        (
            0.0f64..1.5,
            0.0f64..1.0,
            proptest::option::of((0usize..4, -1i64..=1)),
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        proptest::option::of(0.0f64..1.5),
    )
        .prop_map(
            |(
                window,
                reserve,
                (warning, span),
                (auto, ahead, make_room),
                point,
                (size, tools, edge),
                flags,
                retry,
            )| {
                let trigger = warning + (0.99 - warning) * span;
                let policy = ContextPolicy {
                    context_window: window,
                    output_reserve: window * reserve / 100,
                    warning,
                    trigger,
                    ..ContextPolicy::default()
                };
                let usable = policy.usable_tokens() as f64;
                let from = ahead.map_or(0, |share| (share * usable) as usize);
                let mut check = ContextCheck::new(&policy, auto);
                if ahead.is_some() {
                    check = check.working_ahead(from, make_room);
                }
                // A threshold itself, or one token either side of it, half of the time: where
                // the rules change.
                let tokens = match edge {
                    None => (size * usable) as usize,
                    Some((which, offset)) => {
                        let at = [
                            policy.warning_tokens(),
                            policy.trigger_tokens(),
                            policy.usable_tokens(),
                            from,
                        ][which];
                        at.saturating_add_signed(offset as isize)
                    }
                };
                let (job_in_flight, tool_call_open, warned) = flags;
                let measure = ContextMeasure {
                    point,
                    tokens,
                    tool_tokens: (tools * tokens as f64) as usize,
                    job_in_flight,
                    tool_call_open,
                    warned,
                    retry_from: retry.map(|r| (r * usable) as usize),
                };
                Case {
                    check,
                    policy,
                    measure,
                }
            },
        )
}

/// How far a step goes: monotone in the request's tokens.
fn rank(step: ContextStep) -> u8 {
    match step {
        ContextStep::GoOn => 0,
        ContextStep::WorkAhead => 1,
        ContextStep::Join => 2,
        ContextStep::Compact | ContextStep::MakeRoom => 3,
    }
}

proptest! {
    #[test]
    fn below_the_quiet_bound_the_check_is_quiet_whatever_the_count(case in case()) {
        let Case { check, measure, .. } = case;
        let quiet = check.quiet_below(measure.point, measure.job_in_flight, measure.retry_from);
        prop_assume!(measure.tokens < quiet);
        let action = check.decide(&measure);
        prop_assert_eq!(action.step, ContextStep::GoOn);
        let warning = match measure.point {
            CheckPoint::BeforeCall => Warning::Keep,
            CheckPoint::AfterTurn => Warning::Rearm,
        };
        prop_assert_eq!(action.warning, warning);
    }

    #[test]
    fn nothing_is_compacted_under_the_trigger_nor_under_the_limit_working_ahead(
        case in case()
    ) {
        let Case { check, policy, measure } = case;
        let step = check.decide(&measure).step;
        if matches!(step, ContextStep::Compact | ContextStep::MakeRoom) {
            prop_assert!(measure.tokens >= policy.trigger_tokens());
            prop_assert!(measure.tool_tokens < policy.trigger_tokens().max(policy.usable_tokens()));
            if check.works_ahead() {
                prop_assert!(measure.tokens > policy.usable_tokens());
            }
        }
    }

    #[test]
    fn room_is_made_only_over_the_limit_by_an_agent_that_makes_room(case in case()) {
        let Case { check, policy, measure } = case;
        match check.decide(&measure).step {
            ContextStep::MakeRoom => {
                prop_assert!(check.makes_room());
                prop_assert!(measure.tokens > policy.usable_tokens());
            }
            ContextStep::Compact => prop_assert!(!check.makes_room()),
            _ => {}
        }
    }

    #[test]
    fn a_job_is_joined_only_at_the_limit_by_an_agent_told_to_wait_and_never_twice(case in case()) {
        let Case { check, policy, measure } = case;
        if check.decide(&measure).step == ContextStep::Join {
            prop_assert!(measure.job_in_flight);
            prop_assert!(check.works_ahead() && !check.makes_room());
            prop_assert!(measure.tokens > policy.usable_tokens());
            prop_assert_eq!(check.decide(&measure).warning, Warning::Keep);
        }
        // Once joined, no job is in flight: the check after it never joins again.
        let after = ContextMeasure { job_in_flight: false, ..measure };
        prop_assert_ne!(check.decide(&after).step, ContextStep::Join);
    }

    #[test]
    fn work_ahead_starts_only_past_its_threshold_with_no_job_in_flight_nor_call_open(
        case in case()
    ) {
        let Case { check, policy, measure } = case;
        if check.decide(&measure).step == ContextStep::WorkAhead {
            prop_assert!(check.works_ahead());
            prop_assert!(!measure.job_in_flight && !measure.tool_call_open);
            prop_assert!(!check.must_compact(measure.tokens, measure.tool_tokens));
            let from = check.work_ahead_from(false, measure.retry_from);
            prop_assert!(from.is_some_and(|from| measure.tokens >= from));
            prop_assert!(measure.tokens >= measure.retry_from.unwrap_or(0));
            let latest = policy.trigger_tokens().max(measure.retry_from.unwrap_or(0));
            prop_assert!(from.is_some_and(|from| from <= latest));
        }
    }

    #[test]
    fn working_ahead_the_agent_goes_on_up_to_the_limit(case in case()) {
        let Case { check, policy, measure } = case;
        if !check.works_ahead() || measure.tokens > policy.usable_tokens() {
            return Ok(());
        }
        let step = check.decide(&measure).step;
        prop_assert!(matches!(step, ContextStep::GoOn | ContextStep::WorkAhead), "{:?}", step);
    }

    #[test]
    fn the_blocking_road_compacts_at_the_trigger(case in case()) {
        let Case { check, policy, measure } = case;
        prop_assume!(!check.works_ahead());
        let trigger = policy.trigger_tokens();
        let step = check.decide(&measure).step;
        prop_assert_ne!(step, ContextStep::WorkAhead);
        let due = measure.tokens >= trigger && measure.tool_tokens < trigger;
        prop_assert_eq!(step == ContextStep::Compact, due && check.auto);
    }

    #[test]
    fn the_warning_is_said_once_per_crossing_after_a_turn_only(case in case()) {
        let Case { check, policy, measure } = case;
        let warning = check.decide(&measure).warning;
        let past = measure.tokens >= policy.warning_tokens().min(policy.trigger_tokens())
            || check.must_compact(measure.tokens, measure.tool_tokens);
        let joins = check.decide(&measure).step == ContextStep::Join;
        let expected = match measure.point {
            CheckPoint::BeforeCall => Warning::Keep,
            CheckPoint::AfterTurn if joins => Warning::Keep,
            CheckPoint::AfterTurn if !past => Warning::Rearm,
            CheckPoint::AfterTurn if measure.warned => Warning::Keep,
            CheckPoint::AfterTurn => Warning::Say,
        };
        prop_assert_eq!(warning, expected);
    }

    #[test]
    fn the_step_and_the_warning_are_monotone_in_the_tokens(case in case(), more in 0.0f64..1.0) {
        let Case { check, policy, measure } = case;
        // Tool definitions alone past the trigger are never compacted for: the one exception.
        prop_assume!(measure.tool_tokens < policy.trigger_tokens());
        let bigger = ContextMeasure {
            tokens: measure.tokens + (more * policy.usable_tokens() as f64) as usize,
            ..measure
        };
        let (small, large) = (check.decide(&measure), check.decide(&bigger));
        prop_assert!(rank(small.step) <= rank(large.step), "{:?} then {:?}", small, large);
        if large.warning == Warning::Rearm {
            prop_assert_eq!(small.warning, Warning::Rearm);
        }
    }

    #[test]
    fn a_retried_job_waits_for_the_request_to_grow(case in case(), started in 0usize..1_000_000) {
        let Case { check, .. } = case;
        prop_assert!(check.retry_from(started) > started);
    }
}

/// The defaults at a 32k window with a 4k output reserve: usable 28k, warning 19.6k, trigger
/// 22.4k.
fn defaults() -> (ContextPolicy, ContextMeasure) {
    let policy = ContextPolicy {
        output_reserve: 4_000,
        ..ContextPolicy::for_window(32_000)
    };
    let measure = ContextMeasure {
        point: CheckPoint::AfterTurn,
        tokens: 0,
        tool_tokens: 500,
        job_in_flight: false,
        tool_call_open: false,
        warned: false,
        retry_from: None,
    };
    (policy, measure)
}

#[test]
fn working_ahead_at_the_defaults_starts_at_the_warning_and_makes_room_past_the_limit() {
    let (policy, measure) = defaults();
    let check = ContextCheck::new(&policy, true).working_ahead(policy.warning_tokens(), true);
    let at = |tokens, job_in_flight| {
        check.decide(&ContextMeasure {
            tokens,
            job_in_flight,
            ..measure
        })
    };
    let action = |step, warning| ContextAction { step, warning };
    assert_eq!(at(19_599, false), action(ContextStep::GoOn, Warning::Rearm));
    assert_eq!(
        at(19_600, false),
        action(ContextStep::WorkAhead, Warning::Say)
    );
    assert_eq!(at(22_400, true), action(ContextStep::GoOn, Warning::Say));
    assert_eq!(at(28_000, true), action(ContextStep::GoOn, Warning::Say));
    assert_eq!(
        at(28_001, true),
        action(ContextStep::MakeRoom, Warning::Say)
    );
    assert_eq!(check.retry_from(20_000), 20_700);
}

#[test]
fn an_agent_told_to_wait_joins_the_job_in_flight_then_compacts_if_still_over() {
    let (policy, measure) = defaults();
    let check = ContextCheck::new(&policy, true).working_ahead(policy.warning_tokens(), false);
    let over = ContextMeasure {
        tokens: 28_001,
        job_in_flight: true,
        ..measure
    };
    assert_eq!(check.decide(&over).step, ContextStep::Join);
    let joined = ContextMeasure {
        job_in_flight: false,
        ..over
    };
    assert_eq!(check.decide(&joined).step, ContextStep::Compact);
}

#[test]
fn tool_definitions_alone_past_the_trigger_are_not_compacted_for_before_a_call() {
    let (policy, measure) = defaults();
    let check = ContextCheck::new(&policy, true).working_ahead(policy.warning_tokens(), true);
    let crowded = ContextMeasure {
        point: CheckPoint::BeforeCall,
        tokens: 28_500,
        tool_tokens: 23_000,
        job_in_flight: true,
        ..measure
    };
    assert_eq!(check.decide(&crowded).step, ContextStep::GoOn);
    assert!(check.must_compact(crowded.tokens, crowded.tool_tokens));
    // After a turn the same request is compacted: tool definitions below the limit.
    let after = ContextMeasure {
        point: CheckPoint::AfterTurn,
        ..crowded
    };
    assert_eq!(check.decide(&after).step, ContextStep::MakeRoom);
}

#[test]
fn an_agent_that_does_not_compact_automatically_only_warns() {
    let (policy, measure) = defaults();
    let check = ContextCheck::new(&policy, false).working_ahead(policy.warning_tokens(), true);
    assert!(!check.works_ahead());
    let over = ContextMeasure {
        tokens: 30_000,
        ..measure
    };
    assert_eq!(
        check.decide(&over),
        ContextAction {
            step: ContextStep::GoOn,
            warning: Warning::Say
        }
    );
}
