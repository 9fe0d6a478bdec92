//! Tessellation of rapier colliders into body-frame triangle meshes with face normals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rapier3d::parry::shape::TypedShape;
use rapier3d::prelude::*;

use crate::physics::SimWorld;

/// One collider as triangles in its body's frame.
#[derive(Debug, Clone)]
pub struct RenderMesh {
    /// The body it moves with.
    pub body: RigidBodyHandle,
    /// Vertices in the body frame.
    pub vertices: Vec<[f32; 3]>,
    /// Triangles (counter-clockwise seen from outside).
    pub triangles: Vec<[u32; 3]>,
    /// Colour.
    pub color: [u8; 3],
    /// Centre of a sphere around every vertex, in the body frame (for view culling).
    pub bound_center: [f32; 3],
    /// Radius of that sphere.
    pub bound_radius: f32,
}

/// A sphere around `vertices`: the centre of their bounding box and the largest
/// distance from it.
fn bounding_sphere(vertices: &[[f32; 3]]) -> ([f32; 3], f32) {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for v in vertices {
        for i in 0..3 {
            lo[i] = lo[i].min(v[i]);
            hi[i] = hi[i].max(v[i]);
        }
    }
    if vertices.is_empty() {
        return ([0.0; 3], 0.0);
    }
    let c = [
        (lo[0] + hi[0]) / 2.0,
        (lo[1] + hi[1]) / 2.0,
        (lo[2] + hi[2]) / 2.0,
    ];
    let r = vertices
        .iter()
        .map(|v| ((v[0] - c[0]).powi(2) + (v[1] - c[1]).powi(2) + (v[2] - c[2]).powi(2)).sqrt())
        .fold(0.0f32, f32::max);
    (c, r)
}

/// All meshes of a world (shared by clones of it).
#[derive(Debug, Clone)]
pub struct MeshSet {
    /// The meshes.
    pub meshes: Arc<Vec<RenderMesh>>,
    /// Unique per [`MeshSet::build`] (clones share it): names this geometry in
    /// a rasteriser's cache of the fixed scenery.
    pub(crate) id: u64,
}

static NEXT_MESH_SET_ID: AtomicU64 = AtomicU64::new(0);

impl MeshSet {
    /// Tessellates every collider of `world`.
    pub fn build(world: &SimWorld) -> MeshSet {
        let mut meshes = Vec::new();
        for info in &world.colliders {
            let Some(c) = world.world.colliders.get(info.handle) else {
                continue;
            };
            let (verts, tris) = match c.shape().as_typed_shape() {
                TypedShape::Cuboid(s) => s.to_trimesh(),
                TypedShape::Cylinder(s) => s.to_trimesh(14),
                TypedShape::Capsule(s) => s.to_trimesh(12, 6),
                TypedShape::Ball(s) => s.to_trimesh(12, 8),
                _ => continue,
            };
            let local = c.position_wrt_parent().copied().unwrap_or(Pose::IDENTITY);
            let vertices: Vec<[f32; 3]> = verts
                .iter()
                .map(|v| {
                    let p = local.transform_point(Vector::new(v.x, v.y, v.z));
                    [p.x, p.y, p.z]
                })
                .collect();
            let (bound_center, bound_radius) = bounding_sphere(&vertices);
            meshes.push(RenderMesh {
                body: info.body,
                vertices,
                triangles: tris,
                color: info.color,
                bound_center,
                bound_radius,
            });
        }
        MeshSet {
            meshes: Arc::new(meshes),
            id: NEXT_MESH_SET_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Total triangle count.
    pub fn triangle_count(&self) -> usize {
        self.meshes.iter().map(|m| m.triangles.len()).sum()
    }
}
