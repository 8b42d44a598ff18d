//! Fuzz target: ECS task/container metadata and task-protection answers.
#![no_main]

use drainit::proto::ecs_body::{is_stopping, parse_container, parse_protection_answer, parse_task};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let me = parse_container(data).ok();
    if let Ok(task) = parse_task(data) {
        assert!(!task.desired_status.is_empty());
        let _ = is_stopping(&task, me.as_ref());
    }
    let _ = parse_protection_answer(200, data);
});
