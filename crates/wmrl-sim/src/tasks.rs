//! The LIBERO-Long (LIBERO-10) task registry: ten scenes in LIBERO's task-id
//! order, compiled in from `scenes/libero_long/*.toml`.

use serde::Serialize;

use crate::error::{Result, SimError};
use crate::scene::Scene;

/// Number of LIBERO-Long tasks.
pub const NUM_TASKS: usize = 10;

/// Evaluation horizon of LIBERO-Long (control steps after settling).
pub const MAX_EPISODE_STEPS: usize = 520;

macro_rules! scene_files {
    ($($file:literal),* $(,)?) => {
        [$((concat!("scenes/libero_long/", $file), include_str!(concat!("../../../scenes/libero_long/", $file)))),*]
    };
}

const SCENES: [(&str, &str); NUM_TASKS] = scene_files!(
    "00_living_room_scene2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket.toml",
    "01_living_room_scene2_put_both_the_cream_cheese_box_and_the_butter_in_the_basket.toml",
    "02_kitchen_scene3_turn_on_the_stove_and_put_the_moka_pot_on_it.toml",
    "03_kitchen_scene4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet_and_close_it.toml",
    "04_living_room_scene5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate.toml",
    "05_study_scene1_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy.toml",
    "06_living_room_scene6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate.toml",
    "07_living_room_scene1_put_both_the_alphabet_soup_and_the_cream_cheese_box_in_the_basket.toml",
    "08_kitchen_scene8_put_both_moka_pots_on_the_stove.toml",
    "09_kitchen_scene6_put_the_yellow_and_white_mug_in_the_microwave_and_close_it.toml",
);

/// A registered task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskSpec {
    /// LIBERO-10 task id, 0..10.
    pub index: usize,
    /// LIBERO task name, e.g. `KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it`.
    pub name: String,
    /// The natural-language instruction (BDDL `:language`).
    pub instruction: String,
    /// Path of its scene file in the repository.
    pub scene_file: String,
    /// The parsed scene.
    #[serde(skip)]
    pub scene: Scene,
}

/// The ten LIBERO-Long tasks in task-id order.
pub fn libero_long_tasks() -> Vec<TaskSpec> {
    SCENES
        .iter()
        .enumerate()
        .map(|(index, (file, text))| {
            let scene = Scene::from_toml(text, file)
                .expect("the built-in scene files parse (tested in scene_files)");
            TaskSpec {
                index,
                name: scene.name.clone(),
                instruction: scene.language.clone(),
                scene_file: file.to_string(),
                scene,
            }
        })
        .collect()
}

/// One task by index.
pub fn task(index: usize) -> Result<TaskSpec> {
    libero_long_tasks()
        .into_iter()
        .nth(index)
        .ok_or(SimError::UnknownTask {
            index,
            count: NUM_TASKS,
        })
}
