//! Table layouts of LIBERO's three scene classes (kitchen, living room, study):
//! table size and height, workspace offset for BDDL regions, robot base pose and
//! the agent-view camera, from `shared/reference/libero-long.md` §1.

use serde::{Deserialize, Serialize};

/// Fixture types that are the table itself (modelled by the layout, not the catalog).
pub const TABLE_TYPES: &[&str] = &["kitchen_table", "living_room_table", "study_table"];

/// A camera pose: position and MuJoCo-convention quaternion (w, x, y, z); the camera
/// looks along its local -z with +y up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CameraPose {
    /// Position (m).
    pub pos: [f64; 3],
    /// Orientation (w, x, y, z).
    pub quat_wxyz: [f64; 4],
    /// Vertical field of view (deg).
    pub fovy_deg: f64,
}

/// One of LIBERO's table layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `LIBERO_Kitchen_Tabletop_Manipulation`.
    Kitchen,
    /// `LIBERO_Living_Room_Tabletop_Manipulation`.
    LivingRoom,
    /// `LIBERO_Study_Tabletop_Manipulation`.
    Study,
}

impl Layout {
    /// The layout of a BDDL problem class, if modelled.
    pub fn from_problem(problem: &str) -> Option<Layout> {
        let p = problem.to_ascii_lowercase();
        if p.contains("kitchen") {
            Some(Layout::Kitchen)
        } else if p.contains("living_room") {
            Some(Layout::LivingRoom)
        } else if p.contains("study") {
            Some(Layout::Study)
        } else {
            None
        }
    }

    /// Offset added to BDDL region coordinates (x, y) and the table-top height z (m).
    pub fn workspace_offset(self) -> [f64; 3] {
        match self {
            Layout::Kitchen => [0.0, 0.0, 0.90],
            Layout::LivingRoom => [0.0, 0.0, 0.437],
            Layout::Study => [-0.2, 0.0, 0.885],
        }
    }

    /// Table-top size (x, y) and the x of its centre (m).
    pub fn table(self) -> ([f64; 2], f64) {
        match self {
            Layout::Kitchen => ([1.0, 1.2], 0.0),
            Layout::LivingRoom => ([0.70, 1.6], 0.0),
            Layout::Study => ([1.0, 1.2], -0.2),
        }
    }

    /// Table colour.
    pub fn table_color(self) -> [u8; 3] {
        match self {
            Layout::Kitchen => [200, 196, 188],
            Layout::LivingRoom => [150, 110, 75],
            Layout::Study => [170, 130, 90],
        }
    }

    /// Robot base (link0) position (m); the robot faces +x.
    pub fn robot_base(self) -> [f64; 3] {
        match self {
            Layout::Kitchen => [-0.66, 0.0, 0.912],
            Layout::LivingRoom => [-0.51, 0.0, 0.42],
            Layout::Study => [-0.75, 0.0, 0.912],
        }
    }

    /// LIBERO's agent-view camera.
    pub fn agent_camera(self) -> CameraPose {
        match self {
            Layout::Kitchen => CameraPose {
                pos: [0.6586, 0.0, 1.6104],
                quat_wxyz: [0.638, 0.305, 0.305, 0.638],
                fovy_deg: 45.0,
            },
            Layout::Study => CameraPose {
                pos: [0.4586, 0.0, 1.6104],
                quat_wxyz: [0.638, 0.305, 0.305, 0.638],
                fovy_deg: 45.0,
            },
            Layout::LivingRoom => CameraPose {
                pos: [0.6066, 0.0, 0.96],
                quat_wxyz: [0.618, 0.343, 0.343, 0.618],
                fovy_deg: 45.0,
            },
        }
    }
}
