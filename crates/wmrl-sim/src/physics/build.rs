//! Building the rapier world of a scene: floor, table, robot (URDF → multibody),
//! fixtures with jointed links, and free objects as compound primitive colliders.

use std::path::Path;

use nalgebra::{Isometry3, UnitQuaternion};
use rapier3d::prelude::*;
use rapier3d_urdf::{UrdfLoaderOptions, UrdfMultibodyOptions, UrdfRobot};

use super::convert::{iso_xyz_rpy, to_iso, to_pose};
use crate::error::{Result, SimError};
use crate::robot::RobotModel;
use crate::scene::{Catalog, JointKind, Layout, ObjectType, Part, Scene, Shape, TABLE_TYPES};

/// Physics settings.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldParams {
    /// Physics rate (Hz) (default: 240).
    pub physics_hz: f64,
    /// Arm joint motor stiffness, acceleration-based (1/s²) (default: 60000).
    /// Rapier turns stiffness/damping into a soft constraint whose position
    /// correction rate is about k / (k·dt + c); at 2500/100 that was ~23/s and the
    /// arm lagged its IK goals by several control steps, overshooting every
    /// waypoint by centimetres and knocking objects over.
    pub arm_stiffness: f32,
    /// Arm joint motor damping (1/s) (default: 500).
    pub arm_damping: f32,
    /// Finger motor stiffness (default: 1000).
    pub finger_stiffness: f32,
    /// Finger motor damping (default: 60).
    pub finger_damping: f32,
    /// Maximum finger force (N) (default: 40; the URDF effort limit caps it).
    pub gripper_force: f32,
    /// Friction coefficient of the robot's colliders (default: 1.5).
    pub robot_friction: f32,
    /// Solver iterations per physics step (default: 4).
    pub solver_iterations: usize,
}

impl WorldParams {
    /// Defaults with the solver-iteration count from `WMRL_SIM_ITERS` and the arm
    /// motor gains from `WMRL_ARM_STIFFNESS` / `WMRL_ARM_DAMPING` (for experiments).
    pub fn from_env() -> WorldParams {
        let mut p = WorldParams::default();
        if let Some(n) = std::env::var("WMRL_SIM_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            p.solver_iterations = n;
        }
        let f = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f32>().ok());
        if let Some(v) = f("WMRL_ARM_STIFFNESS") {
            p.arm_stiffness = v;
        }
        if let Some(v) = f("WMRL_ARM_DAMPING") {
            p.arm_damping = v;
        }
        p
    }
}

impl Default for WorldParams {
    fn default() -> Self {
        WorldParams {
            physics_hz: 240.0,
            arm_stiffness: 60000.0,
            arm_damping: 500.0,
            finger_stiffness: 1000.0,
            finger_damping: 60.0,
            gripper_force: 40.0,
            robot_friction: 1.5,
            solver_iterations: 4,
        }
    }
}

/// A collider with what the renderer and the contact tests need.
#[derive(Debug, Clone)]
pub struct ColliderInfo {
    /// The collider.
    pub handle: ColliderHandle,
    /// Its body.
    pub body: RigidBodyHandle,
    /// Its colour.
    pub color: [u8; 3],
}

/// The robot's bodies and joints.
#[derive(Debug, Clone)]
pub struct RobotBodies {
    /// Base (link0) pose in the world.
    pub base: Isometry3<f64>,
    /// Arm joints in chain order.
    pub arm: Vec<MultibodyJointHandle>,
    /// The two finger joints.
    pub fingers: [MultibodyJointHandle; 2],
    /// The two finger bodies.
    pub finger_bodies: [RigidBodyHandle; 2],
    /// Body carrying the wrist camera.
    pub camera_body: RigidBodyHandle,
    /// All link bodies.
    pub links: Vec<RigidBodyHandle>,
}

/// A jointed link of a fixture.
#[derive(Debug, Clone)]
pub struct LinkBodies {
    /// Link name in the object type.
    pub name: String,
    /// Its body.
    pub body: RigidBodyHandle,
    /// Its joint to the fixture root.
    pub joint: MultibodyJointHandle,
    /// Joint type.
    pub kind: JointKind,
    /// Its colliders.
    pub colliders: Vec<ColliderHandle>,
}

/// A scene entity's bodies.
#[derive(Debug, Clone)]
pub struct EntityBodies {
    /// Instance name.
    pub name: String,
    /// Its type.
    pub spec: ObjectType,
    /// Free object (true) or fixture (false).
    pub is_object: bool,
    /// Root body (fixed for fixtures).
    pub root: RigidBodyHandle,
    /// Root colliders.
    pub colliders: Vec<ColliderHandle>,
    /// Jointed links.
    pub links: Vec<LinkBodies>,
}

/// The rapier world of one task plus the handles that give it meaning.
pub struct SimWorld {
    /// Rapier state.
    pub world: PhysicsWorld,
    /// Robot handles.
    pub robot: RobotBodies,
    /// Fixtures and objects in scene order (tables excluded).
    pub entities: Vec<EntityBodies>,
    /// Every collider with its colour.
    pub colliders: Vec<ColliderInfo>,
    /// The table layout.
    pub layout: Layout,
    /// Table-top height (m).
    pub table_top: f64,
    /// Settings.
    pub params: WorldParams,
}

impl Clone for SimWorld {
    fn clone(&self) -> Self {
        let w = &self.world;
        SimWorld {
            world: PhysicsWorld {
                gravity: w.gravity,
                integration_parameters: w.integration_parameters,
                physics_pipeline: PhysicsPipeline::new(),
                collision_pipeline: CollisionPipeline::new(),
                islands: w.islands.clone(),
                broad_phase: w.broad_phase.clone(),
                narrow_phase: w.narrow_phase.clone(),
                bodies: w.bodies.clone(),
                colliders: w.colliders.clone(),
                impulse_joints: w.impulse_joints.clone(),
                multibody_joints: w.multibody_joints.clone(),
                soft_bodies: w.soft_bodies.clone(),
                ccd_solver: w.ccd_solver.clone(),
            },
            robot: self.robot.clone(),
            entities: self.entities.clone(),
            colliders: self.colliders.clone(),
            layout: self.layout,
            table_top: self.table_top,
            params: self.params.clone(),
        }
    }
}

/// Collision group of the floor, the table and the robot's pedestal.
const STATIC_GROUP: u32 = 1;

/// The static scenery: touches everything (fixed–fixed pairs are skipped by
/// rapier anyway), but fixtures filter it out.
const STATIC_GROUPS: InteractionGroups = InteractionGroups::new(
    Group::from_bits_retain(STATIC_GROUP),
    Group::ALL,
    InteractionTestMode::And,
);

/// Collision groups of the `index`-th fixture (its fixed shell and its jointed
/// links): a group of its own that it filters out, and the static scenery filtered
/// out too. A drawer, door or knob is held in place by its joint (with limits),
/// so contacts with its own shell, its sibling links or the table it stands on
/// only cost solver time (a drawer sliding on the table top, three drawers
/// rubbing each other: ~90 contact pairs in task 3) and add friction the joint
/// damping already models. Objects and the robot still touch every link.
/// Fixtures beyond the 31st share groups (and so do not touch each other).
fn fixture_groups(index: usize) -> InteractionGroups {
    let own = 1u32 << (1 + index % 31);
    InteractionGroups::new(
        Group::from_bits_retain(own),
        Group::from_bits_retain(!(own | STATIC_GROUP)),
        InteractionTestMode::And,
    )
}

fn part_collider(part: &Part, density: f32, friction: f32) -> ColliderBuilder {
    let base = iso_xyz_rpy(part.pos, part.rpy);
    let (builder, local) = match part.shape {
        Shape::Box(h) => (
            ColliderBuilder::cuboid(h[0] as f32, h[1] as f32, h[2] as f32),
            base,
        ),
        Shape::Cylinder([r, hh]) => (
            ColliderBuilder::cylinder(hh as f32, r as f32),
            base * UnitQuaternion::from_euler_angles(std::f64::consts::FRAC_PI_2, 0.0, 0.0),
        ),
        Shape::Capsule([r, hh]) => (ColliderBuilder::capsule_z(hh as f32, r as f32), base),
        Shape::Sphere(r) => (ColliderBuilder::ball(r as f32), base),
    };
    builder
        .position(to_pose(&local))
        .density(density)
        .friction(friction)
}

fn density_of(mass: f64, parts: &[Part]) -> f32 {
    let volume: f64 = parts.iter().map(|p| p.shape.volume()).sum();
    if volume > 0.0 {
        (mass / volume) as f32
    } else {
        100.0
    }
}

impl SimWorld {
    /// Builds the world of `scene` with `robot`. Entities sit at placeholder poses
    /// until a [`SimState`](super::SimState) is applied.
    pub fn build(scene: &Scene, robot: &RobotModel, params: WorldParams) -> Result<SimWorld> {
        let _span = tracing::debug_span!("build_world", scene = %scene.name).entered();
        let layout = scene.layout().ok_or_else(|| SimError::InvalidScene {
            scene: scene.name.clone(),
            message: format!(
                "problem class `{}` has no table layout (expected kitchen, living_room or study)",
                scene.problem
            ),
        })?;
        let mut catalog = Catalog::builtin();
        catalog.extend(scene.object_types.iter().cloned());

        let mut world = PhysicsWorld::new();
        world.gravity = Vector::new(0.0, 0.0, -9.81);
        world.integration_parameters.dt = (1.0 / params.physics_hz) as f32;
        world.integration_parameters.num_solver_iterations = params.solver_iterations;
        // Rapier 0.36 recycles a pair's contacts until the bodies have moved
        // 5 cm relative to each other; a finger passing the top of a pot then
        // keeps the stale "resting on the rim" contact and is stopped beside
        // it. Grasping needs fresh contacts every substep (the experts went
        // from 80.6% to 88.8% mean success, the moka-pot task from 70% to 96%;
        // about 8% fewer control steps per second).
        world.integration_parameters.contact_recycling = false;
        let mut colliders = Vec::new();

        // Floor, table, and a pedestal under a mounted robot.
        let offset = layout.workspace_offset();
        let table_top = offset[2];
        let (size, table_x) = layout.table();
        let statics = world.insert_body(RigidBodyBuilder::fixed());
        let mut add_static = |world: &mut PhysicsWorld, c: ColliderBuilder, color: [u8; 3]| {
            let h = world.insert_collider(c.collision_groups(STATIC_GROUPS), Some(statics));
            colliders.push(ColliderInfo {
                handle: h,
                body: statics,
                color,
            });
        };
        add_static(
            &mut world,
            ColliderBuilder::cuboid(3.0, 3.0, 0.05).translation(Vector::new(0.0, 0.0, -0.05)),
            [120, 116, 110],
        );
        // The floor goes on, unrendered, beyond the 6 m the cameras see: an
        // object knocked off the table rolls away on it (a task failure)
        // instead of falling off an edge (which would look like instability).
        world.insert_collider(
            ColliderBuilder::cuboid(40.0, 40.0, 0.05)
                .translation(Vector::new(0.0, 0.0, -0.05))
                .collision_groups(STATIC_GROUPS),
            Some(statics),
        );
        add_static(
            &mut world,
            ColliderBuilder::cuboid(size[0] as f32 / 2.0, size[1] as f32 / 2.0, 0.025)
                .translation(Vector::new(table_x as f32, 0.0, table_top as f32 - 0.025))
                .friction(1.0),
            layout.table_color(),
        );
        for (sx, sy) in [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)] {
            let leg_h = (table_top - 0.05) as f32 / 2.0;
            add_static(
                &mut world,
                ColliderBuilder::cuboid(0.025, 0.025, leg_h).translation(Vector::new(
                    table_x as f32 + sx * (size[0] as f32 / 2.0 - 0.05),
                    sy * (size[1] as f32 / 2.0 - 0.05),
                    leg_h,
                )),
                [90, 80, 70],
            );
        }
        let base_pos = layout.robot_base();
        if base_pos[2] > 0.2 {
            add_static(
                &mut world,
                ColliderBuilder::cylinder(base_pos[2] as f32 / 2.0 - 0.005, 0.12)
                    .rotation(Vector::new(std::f32::consts::FRAC_PI_2, 0.0, 0.0))
                    .translation(Vector::new(
                        base_pos[0] as f32 - 0.03,
                        base_pos[1] as f32,
                        base_pos[2] as f32 / 2.0 - 0.005,
                    )),
                [60, 60, 64],
            );
        }

        let robot_bodies = insert_robot(&mut world, robot, base_pos, &params, &mut colliders)?;

        let mut entities = Vec::new();
        let mut fixtures = 0;
        for (entity, is_object) in scene
            .fixtures
            .iter()
            .map(|e| (e, false))
            .chain(scene.objects.iter().map(|e| (e, true)))
        {
            if TABLE_TYPES.contains(&entity.kind.as_str()) {
                continue;
            }
            let spec = catalog
                .get(&entity.kind)
                .ok_or_else(|| SimError::UnknownObjectType {
                    name: entity.name.clone(),
                    kind: entity.kind.clone(),
                    known: catalog.known_names().join(", "),
                })?;
            let groups = if is_object {
                InteractionGroups::all()
            } else {
                fixtures += 1;
                fixture_groups(fixtures - 1)
            };
            entities.push(insert_entity(
                &mut world,
                &entity.name,
                spec,
                is_object,
                groups,
                table_top,
                &mut colliders,
            ));
        }

        Ok(SimWorld {
            world,
            robot: robot_bodies,
            entities,
            colliders,
            layout,
            table_top,
            params,
        })
    }

    /// Index of an entity by name.
    pub fn entity_index(&self, name: &str) -> Option<usize> {
        self.entities.iter().position(|e| e.name == name)
    }

    /// World pose of a body.
    pub fn body_pose(&self, body: RigidBodyHandle) -> Isometry3<f64> {
        to_iso(self.world.bodies[body].position())
    }

    /// Position of a 1-DoF multibody joint (rad or m).
    pub fn joint_position(&self, joint: MultibodyJointHandle) -> f64 {
        let Some((mb, link)) = self.world.multibody_joints.get(joint) else {
            return 0.0;
        };
        let Some(link) = mb.link(link) else {
            return 0.0;
        };
        let c = link.joint.coords();
        if link.joint.data.locked_axes.contains(JointAxesMask::LIN_X) {
            c[3] as f64
        } else {
            c[0] as f64
        }
    }

    /// Velocity of a 1-DoF multibody joint.
    pub fn joint_velocity(&self, joint: MultibodyJointHandle) -> f64 {
        let Some((mb, link)) = self.world.multibody_joints.get(joint) else {
            return 0.0;
        };
        let Some(link) = mb.link(link) else {
            return 0.0;
        };
        mb.joint_velocity(link).get(0).copied().unwrap_or(0.0) as f64
    }

    /// Sets a position motor on a 1-DoF joint.
    pub fn set_joint_motor(
        &mut self,
        joint: MultibodyJointHandle,
        target: f32,
        target_vel: f32,
        stiffness: f32,
        damping: f32,
        max_force: f32,
    ) {
        if let Some((mb, link)) = self.world.multibody_joints.get_mut(joint)
            && let Some(link) = mb.link_mut(link)
        {
            let axis = if link.joint.data.locked_axes.contains(JointAxesMask::LIN_X) {
                JointAxis::AngX
            } else {
                JointAxis::LinX
            };
            link.joint
                .data
                .set_motor(axis, target, target_vel, stiffness, damping);
            link.joint.data.set_motor_max_force(axis, max_force);
        }
    }

    /// Whether any collider in `a` touches any collider in `b`.
    pub fn in_contact(&self, a: &[ColliderHandle], b: &[ColliderHandle]) -> bool {
        a.iter().any(|&ca| {
            b.iter().any(|&cb| {
                self.world
                    .narrow_phase
                    .contact_pair(ca, cb)
                    .is_some_and(|p| p.has_any_active_contact())
            })
        })
    }

    /// All colliders of an entity, links included.
    pub fn entity_colliders(&self, index: usize) -> Vec<ColliderHandle> {
        let e = &self.entities[index];
        let mut v = e.colliders.clone();
        for l in &e.links {
            v.extend_from_slice(&l.colliders);
        }
        v
    }

    /// Advances the physics by one step.
    pub fn step(&mut self) {
        self.world.step();
    }
}

fn insert_robot(
    world: &mut PhysicsWorld,
    robot: &RobotModel,
    base_pos: [f64; 3],
    params: &WorldParams,
    colliders: &mut Vec<ColliderInfo>,
) -> Result<RobotBodies> {
    let base = Isometry3::translation(base_pos[0], base_pos[1], base_pos[2]);
    let options = UrdfLoaderOptions {
        make_roots_fixed: true,
        shift: to_pose(&base),
        // Gravity compensation, as robosuite's controllers provide.
        rigid_body_blueprint: RigidBodyBuilder::dynamic()
            .gravity_scale(0.0)
            .can_sleep(false),
        collider_blueprint: ColliderBuilder::default()
            .density(0.0)
            .friction(params.robot_friction),
        ..Default::default()
    };
    let urdf_robot = UrdfRobot::from_robot(&robot.urdf, options, Path::new("."));
    let link_src: Vec<usize> = urdf_robot.links.iter().map(|l| l.urdf_link_index).collect();
    let joint_src: Vec<usize> = urdf_robot
        .joints
        .iter()
        .map(|j| j.urdf_joint_index)
        .collect();
    let handles = urdf_robot.insert_using_multibody_joints(
        &mut world.bodies,
        &mut world.colliders,
        &mut world.multibody_joints,
        UrdfMultibodyOptions::DISABLE_SELF_CONTACTS,
    );
    let urdf = &robot.urdf;
    let link_body = |name: &str| -> Option<RigidBodyHandle> {
        let src = urdf.links.iter().position(|l| l.name == name)?;
        let i = link_src.iter().position(|&s| s == src)?;
        Some(handles.links[i].body)
    };
    let joint_handle = |name: &str| -> Result<MultibodyJointHandle> {
        let src = urdf.joints.iter().position(|j| j.name == name);
        src.and_then(|src| joint_src.iter().position(|&s| s == src))
            .and_then(|i| handles.joints[i].joint)
            .ok_or_else(|| SimError::Urdf {
                file: robot.urdf_file.clone(),
                message: format!("joint `{name}` did not become a multibody joint"),
            })
    };
    // Colours from the URDF visuals' materials.
    for (i, link) in handles.links.iter().enumerate() {
        let src = &urdf.links[link_src[i]];
        let color = src
            .visual
            .iter()
            .find_map(|v| v.material.as_ref())
            .and_then(|m| {
                m.color.clone().or_else(|| {
                    urdf.materials
                        .iter()
                        .find(|g| g.name == m.name)
                        .and_then(|g| g.color.clone())
                })
            })
            .map(|c| {
                [
                    (c.rgba[0] * 255.0) as u8,
                    (c.rgba[1] * 255.0) as u8,
                    (c.rgba[2] * 255.0) as u8,
                ]
            })
            .unwrap_or([200, 200, 200]);
        for c in &link.colliders {
            colliders.push(ColliderInfo {
                handle: c.handle,
                body: link.body,
                color,
            });
        }
    }
    let arm = robot
        .chain
        .joints
        .iter()
        .map(|j| joint_handle(&j.name))
        .collect::<Result<Vec<_>>>()?;
    let fingers = [
        joint_handle(&robot.spec.finger_joints[0])?,
        joint_handle(&robot.spec.finger_joints[1])?,
    ];
    let finger_child = |name: &str| -> Option<RigidBodyHandle> {
        let j = urdf.joints.iter().find(|j| j.name == name)?;
        link_body(&j.child.link)
    };
    let missing = |what: &str| SimError::Urdf {
        file: robot.urdf_file.clone(),
        message: format!("{what} has no body"),
    };
    let finger_bodies = [
        finger_child(&robot.spec.finger_joints[0]).ok_or_else(|| missing("finger 1"))?,
        finger_child(&robot.spec.finger_joints[1]).ok_or_else(|| missing("finger 2"))?,
    ];
    let camera_body =
        link_body(&robot.spec.wrist_camera.link).ok_or_else(|| missing("the wrist camera link"))?;
    // Joint damping from the URDF, as multibody damping.
    for (j, h) in robot.chain.joints.iter().zip(&arm) {
        if let Some((mb, link)) = world.multibody_joints.get_mut(*h)
            && let Some(l) = mb.link(link)
        {
            let dof = l.assembly_id();
            if dof < mb.damping().len() {
                mb.damping_mut()[dof] = j.damping as f32;
            }
        }
    }
    Ok(RobotBodies {
        base,
        arm,
        fingers,
        finger_bodies,
        camera_body,
        links: handles.links.iter().map(|l| l.body).collect(),
    })
}

fn insert_entity(
    world: &mut PhysicsWorld,
    name: &str,
    spec: &ObjectType,
    is_object: bool,
    groups: InteractionGroups,
    table_top: f64,
    colliders: &mut Vec<ColliderInfo>,
) -> EntityBodies {
    // Placeholder pose far below the table; the initial state places it.
    let parked = Isometry3::translation(0.0, 0.0, table_top - 5.0);
    let body = if is_object {
        RigidBodyBuilder::dynamic()
            .angular_damping(0.05)
            .linear_damping(0.01)
    } else {
        RigidBodyBuilder::fixed()
    };
    let root = world.insert_body(body.pose(to_pose(&parked)));
    let density = density_of(spec.mass, &spec.parts);
    let mut root_colliders = Vec::new();
    for part in &spec.parts {
        let h = world.insert_collider(
            part_collider(part, density, spec.friction as f32).collision_groups(groups),
            Some(root),
        );
        colliders.push(ColliderInfo {
            handle: h,
            body: root,
            color: part.color.unwrap_or(spec.color),
        });
        root_colliders.push(h);
    }
    let mut links = Vec::new();
    for link in &spec.links {
        let origin = Vector::new(
            link.origin[0] as f32,
            link.origin[1] as f32,
            link.origin[2] as f32,
        );
        let axis = Vector::new(
            link.axis[0] as f32,
            link.axis[1] as f32,
            link.axis[2] as f32,
        )
        .normalize();
        let body = world.insert_body(RigidBodyBuilder::dynamic().can_sleep(false).pose(to_pose(
            &(parked * Isometry3::translation(link.origin[0], link.origin[1], link.origin[2])),
        )));
        let density = density_of(link.mass, &link.parts);
        let mut link_colliders = Vec::new();
        for part in &link.parts {
            let h = world.insert_collider(
                part_collider(part, density, spec.friction as f32).collision_groups(groups),
                Some(body),
            );
            colliders.push(ColliderInfo {
                handle: h,
                body,
                color: part.color.unwrap_or(spec.color),
            });
            link_colliders.push(h);
        }
        let range = [link.range[0] as f32, link.range[1] as f32];
        let joint: GenericJoint = match link.joint {
            JointKind::Prismatic => PrismaticJointBuilder::new(axis)
                .local_anchor1(origin)
                .contacts_enabled(false)
                .limits(range)
                .motor_model(MotorModel::ForceBased)
                .motor_velocity(0.0, link.damping as f32)
                .build()
                .into(),
            JointKind::Revolute => RevoluteJointBuilder::new(axis)
                .local_anchor1(origin)
                .contacts_enabled(false)
                .limits(range)
                .motor_model(MotorModel::ForceBased)
                .motor_velocity(0.0, link.damping as f32)
                .build()
                .into(),
        };
        let handle = world
            .multibody_joints
            .insert(root, body, joint, true)
            .expect("a fixture link joint forms a tree with its fixed root");
        links.push(LinkBodies {
            name: link.name.clone(),
            body,
            joint: handle,
            kind: link.joint,
            colliders: link_colliders,
        });
    }
    EntityBodies {
        name: name.to_string(),
        spec: spec.clone(),
        is_object,
        root,
        colliders: root_colliders,
        links,
    }
}
